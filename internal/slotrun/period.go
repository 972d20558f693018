package slotrun

import (
	"context"
	"fmt"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// onceSkip is the look for the period's marker while h holds the slot, before the child
// starts (D15). skip true: the child must not run, and err is the run's end: nil (Skipped,
// told to the reporter) when the period's run is done, ErrPeriodUnknown when the marker
// cannot be read (no silent double run).
func (r *run) onceSkip(h *sema.Holder) (skip bool, err error) {
	m, err := h.PeriodDone(context.Background(), r.cfg.Rules)
	switch {
	case err != nil:
		return true, fmt.Errorf("%w: %w", ErrPeriodUnknown, err)
	case m == nil:
		return false, nil
	}
	r.rep.Skipped(*m)
	return true, nil
}

// closePeriod writes the period's marker after a run that closes the period (sema decides,
// D15: the child exited 0, no signal, the slot was not lost); a failure to write it is told
// (MarkFailed), since the next run may then start at once.
func (r *run) closePeriod(h *sema.Holder, o Outcome, heldAt time.Time) {
	failed := o.End != Ran || o.Signal != 0 || o.RunErr != nil || o.Result.ExitStatus != 0
	end := sema.RunEnd{Started: o.End == Ran, Failed: failed, HeldAt: heldAt}
	switch marked, err := h.ClosePeriod(context.Background(), r.cfg.Rules, end); {
	case err != nil:
		r.rep.Note(Note{Kind: MarkFailed, Err: err})
	case marked:
		r.rep.Note(Note{Kind: Marked, TTL: sema.RoundTTL(r.cfg.Rules.OncePer)})
	}
}

// keepAfter ends holding h by keeping the slot after the run when sema's rules say so (D13:
// the command started, cause did not lose the slot), or by releasing it when it cannot be
// kept, and says which; it reports whether the holding is over (false: the caller releases).
func (r *run) keepAfter(h *sema.Holder, res unitrun.Result, cause error) bool {
	ended, ha, err := h.KeepAfter(context.Background(), r.cfg.Rules, sema.RunEnd{Started: res.Started, Lost: SlotLost(cause)})
	if err != nil {
		r.rep.Note(Note{Kind: KeepFailed, Err: err})
	}
	if ended && ha.Key != "" {
		r.rep.HeldAfter(ha, res.ExitStatus)
	}
	return ended
}
