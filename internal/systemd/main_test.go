package systemd

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Bounds of the tests' polls: generous, since the machine may be loaded.
const (
	pollInterval    = 20 * time.Millisecond
	generousTimeout = 20 * time.Second
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
