// The rules a fleet job puts on each run: a slot kept after the run (D13), one successful
// run per period (D15), an absolute end to the wait. The decisions live here, with the
// requests they lead to; the caller passes how the run ended as plain values (this package
// knows no process) and reports what was done.

package fleet

import "time"

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
