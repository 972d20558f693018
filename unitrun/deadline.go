package unitrun

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// This file is used by both processes: the lease's deadline as the caller hands it to Run
// (Deadline) and as it travels over the control pipe to the guardian (D7b).

// Deadline is the time by which the command must be gone, as the caller (conch) learns it
// anew with every confirmed keep-alive of its lease (D7b). Run sends each new value to the
// guardian, which keeps its own copy and stops the command by itself when the caller goes
// silent (stopped, frozen, stuck): it begins the stop at the fence instant (plus
// guardianFenceLag, so that a caller that is alive always acts first) and SIGKILLs the tree by
// the deadline less guardianKillMargin at the latest. Both are instants on this host's
// CLOCK_MONOTONIC, which the guardian shares; nothing else about the lease crosses the pipe.
// The zero Deadline (never Set) asks the guardian for nothing. It is safe for concurrent use.
type Deadline struct {
	mu       sync.Mutex
	fence    time.Time // when the caller itself begins to stop the command
	deadline time.Time // when the slot may go to another holder
	changed  chan struct{}
}

// NewDeadline returns a Deadline with no value yet.
func NewDeadline() *Deadline { return &Deadline{changed: make(chan struct{}, 1)} }

// Set records a new value: fence is when the caller begins to stop the command if the lease is
// not confirmed again before (its deadline less the stop grace and a second, D7), deadline the
// lease's own deadline. Times must carry a monotonic reading (time.Now based). It does not
// block; Run forwards the latest value to the guardian.
func (d *Deadline) Set(fence, deadline time.Time) {
	d.mu.Lock()
	d.fence, d.deadline = fence, deadline
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// word is the control word carrying d's value ("" when there is none yet, or d is nil).
func (d *Deadline) word() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fence.IsZero() {
		return ""
	}
	now := monoNow()
	return fmt.Sprintf("%s %d %d", ctlDeadline, now+int64(time.Until(d.fence)), now+int64(time.Until(d.deadline)))
}

// changes is poked by Set; nil (never ready) for a nil d.
func (d *Deadline) changes() <-chan struct{} {
	if d == nil {
		return nil
	}
	return d.changed
}

// monoNow is CLOCK_MONOTONIC now, in nanoseconds: the clock both processes share.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Timing of the guardian's own fence (D7b).
const (
	// guardianFenceLag is how long after the caller's own fence instant the guardian begins
	// the stop on its own: a caller that runs sends its stop word within milliseconds, so the
	// stop is the caller's and reported as such; only a silent caller leaves it to the
	// guardian. It comes out of the grace; the SIGKILL bound does not move.
	guardianFenceLag = 200 * time.Millisecond
	// guardianKillMargin: the guardian SIGKILLs the tree this long before the lease's
	// deadline at the latest (D7b: by deadline - 1 s), whatever stop is under way.
	guardianKillMargin = time.Second
)

// leaseClock is the guardian's copy of the caller's Deadline (D7b): when it begins the stop
// on its own, and when it SIGKILLs the tree at the latest. Zero: none was sent.
type leaseClock struct {
	stopAt, killBy time.Time
}

// parse takes a ctlDeadline word; it reports false for any other word or a bad one.
func (c *leaseClock) parse(word string) bool {
	f := strings.Fields(word)
	if len(f) != 3 || f[0] != ctlDeadline {
		return false
	}
	fence, err1 := strconv.ParseInt(f[1], 10, 64)
	deadline, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	now, mono := time.Now(), monoNow()
	c.stopAt = now.Add(time.Duration(fence-mono) + guardianFenceLag)
	c.killBy = now.Add(time.Duration(deadline-mono) - guardianKillMargin)
	if c.killBy.Before(c.stopAt) { // a grace too long for the lease: SIGKILL at the fence
		c.killBy = c.stopAt
	}
	return true
}

// set reports whether a deadline was received.
func (c *leaseClock) set() bool { return !c.stopAt.IsZero() }
