package main

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// watchEscalation reports the move to SIGKILL (unitrun's WatchEscalation): once the child is
// being stopped (runCtx ends: conch got a signal or the slot is being lost; or its run-time
// limit, counted from start, has passed) and has not ended a stop grace later, one warning says
// that it ignored its stop signal and is killed with SIGKILL (by the guardian, or by systemd at
// the scope's TimeoutStopSec: D7). Without it the only line was the run's end, and an operator
// could not tell a job that stopped cleanly from one that was killed (D3a). The returned stop,
// called once the run has ended, ends the watch.
func (r *semaRun) watchEscalation(runCtx context.Context, start time.Time) (stop func()) {
	t := r.job.scope.timing(r.job.run.killAfterGiven, r.job.run.runtimeMax)
	return t.WatchEscalation(runCtx, start, func() {
		r.rep.warnf("the child did not stop within %v of %s (--kill-after): it is killed with SIGKILL", t.KillAfter, unix.SignalName(t.StopSignal))
	})
}
