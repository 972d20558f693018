// The rules a fleet job puts on each run: a slot kept after the run (D13), one successful
// run per period (D15), an absolute end to the wait. The decisions live here, with the
// requests they lead to; the caller passes how the run ended as plain values (sema knows no
// process) and reports what was done.

package sema

import (
	"context"
	"time"
)

// RunRules are the rules of a job's runs, decided once by the caller. The zero value is a
// plain run: released at its end, run every time, waiting as long as its context allows.
type RunRules struct {
	HoldAfter time.Duration // keep the slot this long after the run (D13); 0: release it
	OncePer   time.Duration // at most one successful run per period (D15); 0: every run runs
	Deadline  time.Time     // no wait past this instant; zero: none
}

// RunEnd is how a run under a held slot ended, as the caller saw it.
type RunEnd struct {
	Started bool      // the work started
	Lost    bool      // the slot was lost while it ran (the holder's context ended with its own cause, D7)
	Failed  bool      // it did not succeed: a status other than 0, a stop from outside, a limit
	HeldAt  time.Time // when the slot was held, for the period's marker (D15)
}

// DeadlinePassed reports whether the rules' deadline is at or before now: a run must then
// neither wait nor make any request. False when there is no deadline.
func (r RunRules) DeadlinePassed(now time.Time) bool {
	return !r.Deadline.IsZero() && !r.Deadline.After(now)
}

// ClosesPeriod reports whether a run that ended as e closes its period (D15): only with a
// period, and only a run that started, kept its slot and succeeded. Any other run leaves the
// period open, so that the next run, here or elsewhere, tries again.
func (r RunRules) ClosesPeriod(e RunEnd) bool {
	return r.OncePer > 0 && e.Started && !e.Lost && !e.Failed
}

// KeepsSlot reports whether a run that ended as e keeps its slot after it (D13): however it
// ended, once it started, unless the slot was lost (there is nothing left to keep).
func (r RunRules) KeepsSlot(e RunEnd) bool {
	return r.HoldAfter > 0 && e.Started && !e.Lost
}

// PeriodDone reads, while h holds the slot and before the work starts, whether this period's
// run is done (D15): the period's marker, or nil when the rules have no period or the period
// has had no successful run yet. It waits at most min(TTL, 5 s). An error means the marker
// could not be read: the caller must not start the work (never a silent double run).
func (h *Holder) PeriodDone(ctx context.Context, r RunRules) (*OnceMarker, error) {
	if r.OncePer <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, min(h.l.ttl, releaseTimeout))
	defer cancel()
	return h.ReadOnce(ctx)
}

// ClosePeriod writes the period's marker when a run that ended as e closes the period
// (ClosesPeriod), as MarkOnce does, naming the node of the semaphore's Options.Record, the
// run's start (e.HeldAt) and its end (now), in whole seconds, UTC. Call it before Release or
// KeepAfter. marked is false with a nil error when there was nothing to write; errors are
// MarkOnce's: the next run may then start at once.
func (h *Holder) ClosePeriod(ctx context.Context, r RunRules, e RunEnd) (marked bool, err error) {
	if !r.ClosesPeriod(e) {
		return false, nil
	}
	rec := OnceRecord{Node: h.s.opts.Record.Host, Start: e.HeldAt.UTC().Truncate(time.Second), End: time.Now().UTC().Truncate(time.Second)}
	if err := h.MarkOnce(ctx, r.OncePer, rec); err != nil {
		return false, err
	}
	return true, nil
}

// KeepAfter ends the holding by keeping the slot after the run when a run that ended as e
// keeps it (KeepsSlot): HoldAfter with the semaphore's Options.Record, less its scope (no
// process is left behind the slot). ended is false when it did nothing: the caller releases
// as usual. Ended true, the holding is over and h must not be released: with a nil error the
// slot is kept; with an error and ha.Key "" it was released instead; with an error and a key
// it is kept, but the run's old lease only expires later (HoldAfter's errors).
func (h *Holder) KeepAfter(ctx context.Context, r RunRules, e RunEnd) (ended bool, ha HeldAfter, err error) {
	if !r.KeepsSlot(e) {
		return false, HeldAfter{}, nil
	}
	rec := h.s.opts.Record
	rec.Scope = false
	ha, err = h.HoldAfter(ctx, r.HoldAfter, rec)
	return true, ha, err
}
