package sema

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives its tests (STYLE 15): the
// lease keep-alive loop, the holder's supervisors and the watch goroutines
// must all end in Release, stop or when Acquire returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
