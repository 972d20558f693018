package systemdtest

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often WaitFor re-checks a condition.
const pollInterval = 20 * time.Millisecond

// WaitFor calls cond every 20 ms until it returns true (WaitFor returns nil), returns an error
// (returned, wrapped with what), or ctx ends (an error naming what was awaited). It is the
// harness's replacement for sleeping in tests; it may be called from any goroutine.
func WaitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
