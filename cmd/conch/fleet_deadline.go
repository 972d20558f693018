package main

import (
	"time"

	"github.com/conch-project/conch/sema"
)

// checkDeadline reads --deadline against now into j.fleet.deadline; it refuses it with
// --wait, --nonblock or --who, or when it cannot be read (usage errors, 64). A deadline
// already passed is decided when the run starts (deadlinePassed).
func (c *semaCmd) checkDeadline(j *job, now time.Time) error {
	if c.Deadline == "" {
		return nil
	}
	switch {
	case c.Who:
		return usagef("--deadline goes with running a command, not with --who")
	case c.Wait.set:
		return usagef("--deadline and --wait exclude each other: both bound the wait")
	case c.Nonblock:
		return usagef("--deadline and --nonblock exclude each other: --nonblock does not wait")
	}
	d, err := sema.ParseDeadline(c.Deadline.String(), now)
	if err != nil {
		return usagef("--deadline: %v", err)
	}
	j.fleet.deadline = d
	return nil
}

// deadlinePassed is the end of a run whose --deadline has passed by now, before any etcd
// request: no slot (conflict, 75 or -E), saying so; nil when there is none or it is ahead.
func (f fleetValues) deadlinePassed(conflict int, now time.Time) error {
	if !f.rules().DeadlinePassed(now) {
		return nil
	}
	return noSlot(conflict, "--deadline %s has passed: not waiting, the command was not started", f.deadline.Format(time.RFC3339))
}
