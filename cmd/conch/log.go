package main

import (
	"fmt"
	"io"
	"time"

	"github.com/conch-project/conch/sema"
)

// Transition states (D10: the CONCH_STATE journal field).
const (
	stateWait     = "WAIT"
	stateHeld     = "HELD"
	stateReleased = "RELEASED"
	stateTimeout  = "TIMEOUT"
	stateLost     = "LOST"
)

// reporter tells the operator what conch does with one semaphore: one plain
// line per transition on stderr, HELD and RELEASED only with -v (D10).
// Libraries do not log (STYLE 9): sema reports through Options.OnEvent, and
// this turns its events into lines.
type reporter struct {
	w       io.Writer
	verbose bool
	name    string
	max     int
	rev     int64
	ahead   int
	waiting bool
}

func (r *reporter) prefix() string { return fmt.Sprintf("conch: %s[%d]", r.name, r.max) }

// line writes one line about a transition; quiet ones only with -v.
func (r *reporter) line(state string, quiet bool, format string, args ...any) {
	if quiet && !r.verbose {
		return
	}
	fmt.Fprintf(r.w, "%s: %s\n", r.prefix(), fmt.Sprintf(format, args...))
	_ = state // the journal field, once logging goes native (D10)
}

// errorf writes the one line that says why conch exits with a status other
// than the child's (D3). It always prints.
func (r *reporter) errorf(state, format string, args ...any) {
	r.line(state, false, format, args...)
}

// onEvent is sema.Options.OnEvent.
func (r *reporter) onEvent(e sema.Event) {
	switch e.Kind {
	case sema.Enqueued:
		r.rev = e.Rev
		r.line("", true, "enqueued rev=%d lease=%x ttl=%v", e.Rev, int64(e.Lease), e.TTL)
		if e.OtherCapacities > 0 {
			r.line("", false, "WARNING: %d key(s) exist for %q under another --max: those nodes use a different semaphore and do not count against this one (conch sema %s --who)",
				e.OtherCapacities, r.name, r.name)
		}
	case sema.Waiting:
		first := !r.waiting
		r.waiting = true
		changed := e.Ahead != r.ahead
		r.ahead = e.Ahead
		if first || changed {
			r.line(stateWait, !first, "%s", r.waitText())
		}
	case sema.Held:
		r.rev = e.Rev
		r.line(stateHeld, true, "slot held, rev=%d (fencing token)", e.Rev)
	case sema.Reentering:
		r.waiting = false
		r.line(stateWait, false, "lost our place in the queue (%v): re-entering at the back", e.Err)
	}
}

// waitText is the queue position as D10 words it, for the log line and
// sd_notify STATUS=: "waiting for heavy-jobs[2/2], 3 ahead".
func (r *reporter) waitText() string {
	if r.ahead == 0 {
		return fmt.Sprintf("waiting for %s[%d/%d], next in line", r.name, r.max, r.max)
	}
	return fmt.Sprintf("waiting for %s[%d/%d], %d ahead", r.name, r.max, r.max, r.ahead)
}

func (r *reporter) released(status int, held time.Duration) {
	r.line(stateReleased, true, "released after %v, child status %d", held.Round(time.Millisecond), status)
}
