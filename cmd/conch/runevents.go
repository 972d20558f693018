package main

import (
	"fmt"
	"time"

	"github.com/coreos/go-systemd/v22/journal"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
	"golang.org/x/sys/unix"
)

// runEvents is the reporter of job's run as slotrun tells it what happens (slotrun.Reporter):
// it words each event and note with conch's flags, on stderr or in the journal and in
// STATUS= (D10).
type runEvents struct {
	rep *reporter
	job job
	// childDone, when set, flushes the child's relayed output (childStdio's close): called
	// before the lines that end a run that started, so the child's last line is logged first
	childDone func()
	hint      *runNameHint // the name's "did you mean" (namehint.go), joined before the end line
}

// flushChild hands the child's last output to journald before conch's own end line.
func (e *runEvents) flushChild() {
	e.hint.join()
	if e.childDone != nil {
		e.childDone()
	}
}

// Event is sema's queue transitions (reporter.onEvent).
func (e *runEvents) Event(ev sema.Event) {
	if ev.Kind == sema.Enqueued {
		e.hint.enqueued(ev)
	}
	e.rep.onEvent(ev)
}

// Started says the command runs, in scope when it is one (D8, D10: READY=1).
func (e *runEvents) Started(pid int, scope string) {
	e.rep.scope = scope
	e.rep.started(pid)
}

// Stopping is STOPPING=1 as the fence begins (D10).
func (e *runEvents) Stopping(cause error) { e.rep.stopping(cause) }

// Released records the clean end (D3).
func (e *runEvents) Released(status int, held time.Duration) {
	e.flushChild()
	e.rep.released(status, held)
}

// HeldAfter records the slot kept after the run (D13).
func (e *runEvents) HeldAfter(ha sema.HeldAfter, status int) {
	e.flushChild()
	e.rep.heldAfter(ha, status)
}

// Skipped records the run skipped because this period's run is done (D15).
func (e *runEvents) Skipped(m fleet.OnceMarker) { e.rep.skipped(m) }

// Note words the run's other news as conch says it: details with -v, warnings always, except
// the short-lease warning, which -q silences on stderr (a fact of the command line, the same
// on every run: the journal still gets it, D4a).
func (e *runEvents) Note(n slotrun.Note) {
	r := e.rep
	switch n.Kind {
	case slotrun.NoScope:
		r.line("", true, "no systemd scope (%v): the child runs under conch's own supervision", n.Err)
	case slotrun.ScopeFailed:
		r.warnf("WARNING: %v; running the child under conch's own supervision instead (--scope=auto)", n.Err)
	case slotrun.Supervision:
		r.warnf("%v", n.Err)
	case slotrun.Escalated:
		r.warnf("the child did not stop within %v of %s (--kill-after): it is killed with SIGKILL", n.KillAfter, unix.SignalName(n.StopSignal))
	case slotrun.LeaseGranted:
		r.line("", true, "etcd granted a %v lease for --ttl %v (its minimum TTL): using %v", n.TTL, e.job.run.ttl, n.TTL)
	case slotrun.ShortLease:
		if !e.job.run.quiet || r.journal != nil {
			r.warnf("WARNING: %s", shortTTLAdvice(n.TTL, n.KillAfter))
		}
	case slotrun.Requeued:
		r.line(stateWait, false, "slot lost before the command started (%v): queueing again", n.Err)
	case slotrun.KeepFailed:
		r.warnf("WARNING: %v", n.Err)
	case slotrun.MarkFailed:
		r.emit("", journal.PriWarning, false, map[string]string{"CONCH_MARK_FAILED": "1"}, // D15: never silent
			fmt.Sprintf("WARNING: the run succeeded, but this period's marker could not be written (%v): the next run may start at once", n.Err))
	case slotrun.Marked:
		r.line("", true, "period marker written: no other run of %s until %v from now", r.prefix(), n.TTL)
	case slotrun.ReleaseFailed:
		r.line("", false, "could not release (the key goes at lease expiry, %v): %v", n.TTL, n.Err)
	}
}
