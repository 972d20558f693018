package fleet

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives its tests: every holder a test takes
// must be released, its supervisors ended. goleak is tried again for up to 10 s: an etcd
// server's connections end a little after its stop.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		end := time.Now().Add(10 * time.Second)
		for err := goleak.Find(); err != nil; err = goleak.Find() {
			if time.Now().After(end) {
				fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
				code = 1
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	os.Exit(code)
}
