package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/unitrun"
	"golang.org/x/sys/unix"
)

// verdict is how a holding ends, for conch.
type verdict struct {
	requeue bool  // the slot was lost before the command started: queue again (04_sema.md)
	ran     bool  // the child ran and ended: the RELEASED line with its status (D10)
	err     error // the run's end for exitStatus and report; nil: exit 0
}

// endOf words the run's outcome o (slotrun.Decide) as conch's end (D3): 127, 126, the signal
// conch got, or 69 (a scope required and not made) for a command that did not start; the
// signal re-raised for a child stopped with it; 70 for a slot lost; 124 at the run-time limit
// (limit names it, runtimeLimit); else the child's own status, 70 if it has none (its
// guardian was lost), or the signal to die of, with the terminal's said.
func endOf(o slotrun.Outcome, limit string) verdict {
	switch o.End {
	case slotrun.Requeue:
		return verdict{requeue: true}
	case slotrun.NotStarted:
		return verdict{err: notStarted(o.RunErr, o)}
	case slotrun.Signalled:
		if !o.KeptUntil.IsZero() { // D13: the last line and state say the slot is kept
			return verdict{err: signalExit(o.Signal, stateHeldAfter, "%s: stopped the child; %s", unix.SignalName(o.Signal), keptWords(o))}
		}
		return verdict{err: signalExit(o.Signal, stateReleased, "%s: stopped the child and released the slot", unix.SignalName(o.Signal))}
	case slotrun.Fenced:
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran: conch was stopped or stalled until its lease's deadline, so the child's guardian stopped the child on its own before the lease could expire%s", causeNote(o.Cause))}
	case slotrun.StateLost: // D18
		return verdict{err: endf(errSlotLost, stateLost, "etcd lost or rewound its state while the child ran (%v): child killed at once, without the --kill-after grace; another holder may have started on etcd's new state, and CONCH_REV counts again from that state's revisions, so a token is only comparable with another of the same CONCH_CLUSTER_ID and epoch", o.Cause)}
	case slotrun.LostLate:
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran (%v): child killed at once, without the --kill-after grace", o.Cause)}
	case slotrun.Lost:
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran (%v): child stopped", o.Cause)}
	case slotrun.RuntimeExceeded:
		if !o.KeptUntil.IsZero() {
			return verdict{err: endf(errRuntimeMax, stateHeldAfter, "child ran past %s: stopped; %s", limit, keptWords(o))}
		}
		return verdict{err: endf(errRuntimeMax, stateReleased, "child ran past %s: stopped", limit)}
	}
	return ranEnd(o)
}

// ranEnd is the end of a child that ran and ended (endOf's Ran): its own status, 70 if it
// has none, or the signal to die of, with the terminal's said; the journal state is
// HELD_AFTER when the slot is kept after the run (D13).
func ranEnd(o slotrun.Outcome) verdict {
	state, slot := stateReleased, "released the slot"
	if !o.KeptUntil.IsZero() {
		state, slot = stateHeldAfter, keptWords(o)
	}
	xe := &exitError{own: o.Result.ExitStatus, sig: o.Signal, group: o.FromTerminal}
	switch {
	case o.FromTerminal: // D3: every exit other than the child's own status is said, Ctrl-C too
		xe.state, xe.msg = state, fmt.Sprintf("the child died of %s from the terminal: %s, stopping with it", unix.SignalName(o.Signal), slot)
	case o.Signal == 0 && o.Result.ExitStatus < 0: // the guardian was lost while the child ran (D3: 70, not 69's "never started")
		xe.kind, xe.own = errSlotLost, 0
	}
	if o.RunErr != nil { // the child ran, but its supervision failed: say so
		xe.state, xe.msg = state, o.RunErr.Error()
	}
	if *xe == (exitError{}) {
		return verdict{ran: true}
	}
	return verdict{ran: true, err: xe}
}

// keptWords says until when the slot is kept after the run (D13).
func keptWords(o slotrun.Outcome) string {
	return "the slot is kept until " + o.KeptUntil.UTC().Format(time.RFC3339)
}

// causeNote is " (cause)" for a cause that is the slot's loss, "" otherwise.
func causeNote(cause error) string {
	if slotrun.SlotLost(cause) {
		return " (" + cause.Error() + ")"
	}
	return ""
}

// notStarted is the end of a command that did not start (runErr says why).
func notStarted(runErr error, o slotrun.Outcome) error {
	switch {
	case errors.Is(runErr, unitrun.ErrNotFound), errors.Is(runErr, unitrun.ErrNotExecutable):
		return endf(runErr, stateReleased, "%v", runErr)
	case o.Signal != 0:
		return signalExit(o.Signal, stateReleased, "%v", runErr)
	}
	return endf(errUnavailable, stateReleased, "%v", runErr) // a scope required and not made
}
