package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
	"github.com/coreos/go-systemd/v22/journal"
)

// onceSkip is --once-per's look for the period's marker while h holds the slot, before the
// child starts (D15). skip true: the child must not run, and err is the run's end: nil (exit
// 0, the skip said) when the period's run is done, 69 when the marker cannot be read (no
// silent double run).
func (r *semaRun) onceSkip(h *sema.Holder) (skip bool, err error) {
	m, err := h.PeriodDone(context.Background(), r.job.fleet.rules())
	switch {
	case err != nil:
		return true, endf(errUnavailable, stateReleased, "--once-per: cannot read this period's marker, so the command was not started: %v", err)
	case m == nil:
		return false, nil
	}
	r.rep.skipped(*m)
	return true, nil
}

// markOnce writes the period's marker after a run that closes the period (sema decides, D15:
// the child exited 0, conch got no signal, the slot was not lost); a failure to write it is
// said, since the next run may then start at once.
func (r *semaRun) markOnce(h *sema.Holder, v verdict, res unitrun.Result, heldAt time.Time) {
	end := sema.RunEnd{Started: v.ran, Failed: v.err != nil || res.ExitStatus != 0, HeldAt: heldAt}
	switch marked, err := h.ClosePeriod(context.Background(), r.job.fleet.rules(), end); {
	case err != nil:
		r.rep.warnf("WARNING: the run succeeded, but this period's marker could not be written (%v): the next run may start at once", err)
	case marked:
		r.rep.line("", true, "period marker written: no other run of %s until %v from now", r.prefix(), sema.RoundTTL(r.job.fleet.oncePer))
	}
}

// prefix is the run's semaphore as lines name it.
func (r *semaRun) prefix() string { return r.rep.prefix() }

// skipped records a run skipped because this period's run is done (D15):
// a line naming that run and when the next may start, CONCH_SKIPPED=1 in
// the journal, and STATUS=.
func (r *reporter) skipped(m sema.OnceMarker) {
	var ran, next string
	if m.Err != nil {
		ran = fmt.Sprintf("a period marker that cannot be read (%v: %s) counts as this period's run", m.Err, strconv.QuoteToASCII(m.Raw))
	} else {
		ran = fmt.Sprintf("this period's run is done: node %s ran it (rev %d) from %s to %s", who.SafeText(m.Node), m.Rev,
			m.Start.UTC().Format(time.RFC3339), m.End.UTC().Format(time.RFC3339))
	}
	if m.Left < 0 {
		next = fmt.Sprintf("the marker has no lease, so no run starts until it is deleted (etcdctl del %s)", m.Key)
	} else {
		next = fmt.Sprintf("the next run may start after %s (in %v)", time.Now().Add(m.Left).UTC().Format(time.RFC3339), m.Left)
	}
	msg := "skipped: " + ran + "; " + next
	r.emit(stateReleased, journal.PriNotice, false, map[string]string{"CONCH_SKIPPED": "1"}, msg)
	r.sendNotify("STOPPING=1\nSTATUS=" + r.prefix() + ": " + msg)
}
