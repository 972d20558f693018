package main

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// watchEscalation reports the move to SIGKILL: once the child is being stopped (runCtx ends:
// conch got a signal or the slot is being lost; or its run-time limit, counted from start,
// has passed), it waits the stop grace and, if the run has not ended by then, writes one
// warning that the child ignored its stop signal and is killed with SIGKILL (by the guardian,
// or by systemd at the scope's TimeoutStopSec: D7). Without it the only line was the run's
// end, and an operator could not tell a job that stopped cleanly from one that was killed (D3a).
// It starts one goroutine; the returned stop, called once the run has ended, ends it and
// waits for it.
func (r *semaRun) watchEscalation(runCtx context.Context, start time.Time) (stop func()) {
	t := r.job.scope.timing(r.job.run.killAfterGiven, r.job.run.runtimeMax)
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
		case <-runCtx.Done():
		case <-limit:
		case <-done:
			return
		}
		grace := time.NewTimer(t.KillAfter)
		defer grace.Stop()
		select {
		case <-grace.C:
			r.rep.warnf("the child did not stop within %v of %s (--kill-after): it is killed with SIGKILL", t.KillAfter, unix.SignalName(t.StopSignal))
		case <-done:
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
