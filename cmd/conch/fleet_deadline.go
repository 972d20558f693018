package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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
	d, err := parseDeadline(c.Deadline.String(), now)
	if err != nil {
		return usagef("--deadline: %v", err)
	}
	j.fleet.deadline = d
	return nil
}

// deadlinePassed is the end of a run whose --deadline has passed by now, before any etcd
// request: no slot (conflict, 75 or -E), saying so; nil when there is none or it is ahead.
func (f fleetValues) deadlinePassed(conflict int, now time.Time) error {
	if f.deadline.IsZero() || f.deadline.After(now) {
		return nil
	}
	return noSlot(conflict, "--deadline %s has passed: not waiting, the command was not started", f.deadline.Format(time.RFC3339))
}

// parseDeadline reads s as an absolute time: RFC 3339 (with a zone), or
// HH:MM or HH:MM:SS meaning the next such wall-clock time in now's
// location, after now (today if still ahead, else tomorrow; across a
// daylight-saving change the time is normalised as time.Date does).
// Errors say what is accepted; a time in the past is not an error (the
// caller decides).
func parseDeadline(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return time.Time{}, fmt.Errorf("invalid time %s: use RFC 3339 (2026-12-24T06:00:00Z) or HH:MM[:SS]", quoteShort(s))
	}
	var hms [3]int
	limits := [3]int{23, 59, 59}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || n < 0 || n > limits[i] {
			return time.Time{}, fmt.Errorf("invalid time %s: HH:MM[:SS] takes two digits each, 00-23:00-59:00-59", quoteShort(s))
		}
		hms[i] = n
	}
	y, m, d := now.Date()
	t := time.Date(y, m, d, hms[0], hms[1], hms[2], 0, now.Location())
	if !t.After(now) {
		t = time.Date(y, m, d+1, hms[0], hms[1], hms[2], 0, now.Location())
	}
	return t, nil
}
