package slotrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
)

// onceSkip is the look for the period's marker while h holds the slot, before the child
// starts (D15). skip true: the child must not run, and err is the run's end: nil (Skipped,
// told to the reporter) when the period's run is done, ErrPeriodUnknown when the marker
// cannot be read (no silent double run).
func (r *run) onceSkip(h *sema.Holder) (skip bool, err error) {
	m, err := r.job().PeriodDone(context.Background(), h)
	switch {
	case err != nil:
		return true, fmt.Errorf("%w: %w", ErrPeriodUnknown, err)
	case m == nil:
		return false, nil
	}
	r.rep.Skipped(*m)
	return true, nil
}

// closePeriod writes the period's marker after a run that closes the period (fleet decides,
// D15: the child exited 0, no signal, the slot was not lost); a failure to write it is told
// (MarkFailed), since the next run may then start at once.
func (r *run) closePeriod(h *sema.Holder, o Outcome, heldAt time.Time) {
	failed := o.End != Ran || o.Signal != 0 || o.RunErr != nil || o.Result.ExitStatus != 0
	end := fleet.RunEnd{Started: o.End == Ran, Failed: failed, HeldAt: heldAt}
	switch marked, err := r.job().ClosePeriod(context.Background(), h, end); {
	case err != nil:
		r.rep.Note(Note{Kind: MarkFailed, Err: err})
	case marked:
		r.rep.Note(Note{Kind: Marked, TTL: sema.RoundTTL(r.cfg.Rules.OncePer)})
	}
}

// keepAfter ends holding h by keeping the slot after the run when the fleet rules say so (D13:
// the command started, cause did not lose the slot), or by releasing it when it cannot be
// kept, and says which; it reports whether the holding is over (false: the caller releases),
// and the slot kept (Key "" when it was released instead).
// A slot lost while a child that then ended on its own ran (o Ran, e.g. its lease expired
// while the process was stopped) cannot be kept either: a KeepFailed note says so, since the
// run's status is the child's and nothing else would tell it (D13b).
func (r *run) keepAfter(h *sema.Holder, o Outcome, cause error) (bool, sema.HeldAfter) {
	res := o.Result
	lost := SlotLost(cause)
	if lost && o.End == Ran && res.Started && r.cfg.Rules.HoldAfter > 0 {
		r.rep.Note(Note{Kind: KeepFailed, Err: fmt.Errorf("cannot keep the slot after the run: %w; the slot is free, the next holder may start now", cause)})
	}
	if !r.cfg.Rules.KeepsSlot(fleet.RunEnd{Started: res.Started, Lost: lost}) {
		return false, sema.HeldAfter{}
	}
	// the holder's record, less its scope: no process is left behind the slot
	rec := r.cfg.Record
	rec.Scope = false
	ha, err := h.HoldAfter(context.Background(), r.cfg.Rules.HoldAfter, rec)
	if err != nil && ha.Key == "" && (errors.Is(err, sema.ErrLeaseLost) || errors.Is(err, sema.ErrKeyDeleted)) {
		err = fmt.Errorf("%w; the slot is free, the next holder may start now", err)
	}
	if err != nil {
		r.rep.Note(Note{Kind: KeepFailed, Err: err})
	}
	if ha.Key != "" {
		r.rep.HeldAfter(ha, res.ExitStatus)
	}
	return true, ha
}

// job is the run's semaphore under its rules, for the period's marker (D15): the client the
// semaphore uses, and the node the holder record names.
func (r *run) job() fleet.Job {
	return fleet.Job{Client: r.client, Name: r.cfg.Name, Max: r.cfg.Max, Rules: r.cfg.Rules, Node: r.cfg.Record.Host}
}
