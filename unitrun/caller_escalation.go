package unitrun

// This file runs in the caller's process (conch): noticing that a stop moves on to SIGKILL.

import (
	"context"
	"sync"
	"time"
)

// WatchEscalation calls escalated once if a command with stop timing t is still running a
// grace period (t.KillAfter) after its stop began: after ctx ends (the context given to Run,
// whose end stops the command) or, with a runtime limit, t.RuntimeMax after start, whichever
// comes first. That is when the guardian, or systemd at the scope's TimeoutStopSec, sends
// SIGKILL (D7), so that the caller can tell a command that stopped cleanly from one that was
// killed (D3a). It starts one goroutine, which calls escalated; the returned stop, to be
// called once Run has returned, ends it and waits for it (escalated is not called once it has returned).
func (t StopTiming) WatchEscalation(ctx context.Context, start time.Time, escalated func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var limit <-chan time.Time
		if t.RuntimeMax > 0 {
			timer := time.NewTimer(time.Until(start.Add(t.RuntimeMax)))
			defer timer.Stop()
			limit = timer.C
		}
		select {
		case <-ctx.Done():
		case <-limit:
		case <-done:
			return
		}
		grace := time.NewTimer(t.KillAfter)
		defer grace.Stop()
		select {
		case <-grace.C:
			escalated()
		case <-done:
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
