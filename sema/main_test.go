package sema

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/conch-project/conch/internal/etcdtest"
)

// TestMain starts the real etcd the package's examples use (its client URL in
// ETCDCTL_ENDPOINTS, where etcdctl and the examples read it), runs the tests
// and examples, stops it, and fails the package if a goroutine outlives its
// tests: the lease keep-alive loop, the holder's supervisors and the
// watch goroutines must all end in Release, stop or when Acquire returns.
func TestMain(m *testing.M) {
	srv, stop, err := etcdtest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("ETCDCTL_ENDPOINTS", srv.Endpoint)
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
