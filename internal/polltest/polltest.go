// Package polltest is the tests' one way to wait for a condition: poll it, with a
// generous bound, instead of sleeping for a guessed time. It imports nothing of
// conch's, so that every package's tests can use it.
package polltest

import (
	"testing"
	"time"
)

// Every is how often Until checks its condition.
const Every = 10 * time.Millisecond

// Until calls cond every Every until it returns true, and fails t with "timed out after
// <within> waiting for <what>" when within passes first. It must be called from the
// test's goroutine (it may call t.Fatalf); cond is called from it too.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(Every)
	}
}
