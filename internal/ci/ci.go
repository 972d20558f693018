// Package ci tells tests whether they run under CI, where a skipped test
// counts as a failure: a test that lacks what it needs must fail there
// rather than hide a missing install step behind a skip.
package ci

import (
	"fmt"
	"os"
	"testing"
)

// Active reports whether CI is set to anything but "", "false" or "0".
func Active() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

// Unavailable stops t because something it needs is missing: it skips with
// the message (which should say how to fix it) outside CI, and fails under
// CI.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Active() {
		t.Fatalf("%s (CI is set: not skipping)", msg)
	}
	t.Skip(msg)
}
