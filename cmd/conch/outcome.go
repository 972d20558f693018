package main

import (
	"errors"
	"fmt"
	"github.com/conch-project/conch/internal/slotrun"
	"syscall"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
	"golang.org/x/sys/unix"
)

// holding is what the run knows once the child's supervision returned: unitrun's Result and
// error, and the one cause of the run's context (sema.Holder.Bind over the signal context):
// nil while nothing asked the child to stop, errSignal for a signal to conch, the holder's
// error (sema.ErrLeaseLost, ErrFenced, ErrKeyDeleted) for the slot's loss.
type holding struct {
	res    unitrun.Result
	runErr error
	cause  error
	limit  string // the run-time limit that applied, as the line names it (runtimeLimit)
	// terminal: the child had the terminal's foreground (D5), so a Ctrl-C or Ctrl-\ reached
	// it and not conch
	terminal bool
}

// verdict is how a holding ends.
type verdict struct {
	requeue bool  // the slot was lost before the command started: queue again (04_sema.md)
	ran     bool  // the child ran and ended: the RELEASED line with res.ExitStatus (D10)
	err     error // the run's end for exitStatus and report; nil: exit 0
}

// outcome decides how a holding ends (D3, D7): the one pure function from the run's cause
// and unitrun's Result to re-queueing or the exit. A slot lost before the command started
// re-queues, unless the command cannot be run at all (127, 126). A command that did not
// start ends with 127, 126, the signal conch got, or 69 (a scope required and not made). A
// child stopped (or killed by a signal, or whose scope systemd stopped) while conch got a
// signal is stopped with it: conch re-raises it. A child stopped because the slot was lost
// is 70; one stopped at the run-time limit 124. Otherwise the child's own status, 70 if it
// has none (its guardian was lost), or the signal conch got just as the child ended on its own; or, when the child
// had the terminal and died of SIGINT or SIGQUIT (Ctrl-C, Ctrl-\\), that signal, so that
// conch dies of it too and the calling shell script stops, as with flock(1) and timeout(1)
// (the shells' wait-and-cooperative-exit).
func outcome(h holding) verdict {
	sig := slotrun.SignalOf(h.cause)
	lost := slotrun.SlotLost(h.cause)
	cannotRun := errors.Is(h.runErr, unitrun.ErrNotFound) || errors.Is(h.runErr, unitrun.ErrNotExecutable)
	res := h.res
	switch {
	case lost && !res.Started && !cannotRun:
		return verdict{requeue: true}
	case h.runErr != nil && !res.Started:
		return verdict{err: notStarted(h.runErr, sig)}
	case sig != 0 && (res.Stopped || res.ScopeStopped || res.Signal != 0):
		// (a child killed by a signal while conch got one was stopped with it, even if
		// systemd's stop of the scope reached it before conch's own stop request did)
		return verdict{err: signalExit(sig, stateReleased, "%s: stopped the child and released the slot", unix.SignalName(sig))}
	case res.Fenced: // D7b: whatever conch learnt after its stall, the guardian stopped the child
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran: conch was stopped or stalled until its lease's deadline, so the child's guardian stopped the child on its own before the lease could expire%s", causeNote(h.cause))}
	case lost && res.Stopped && errors.Is(h.cause, sema.ErrDeadlinePassed):
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran (%v): child killed at once, without the --kill-after grace", h.cause)}
	case lost && res.Stopped:
		return verdict{err: endf(errSlotLost, stateLost, "slot lost while the child ran (%v): child stopped", h.cause)}
	case res.RuntimeExceeded:
		return verdict{err: endf(errRuntimeMax, stateReleased, "child ran past %s: stopped", h.limit)}
	}
	xe := &exitError{own: res.ExitStatus}
	switch {
	case sig != 0: // the child ended on its own just as the signal came
		xe.sig = sig
	case h.terminal && (res.Signal == syscall.SIGINT || res.Signal == syscall.SIGQUIT):
		xe.sig, xe.group = res.Signal, true
		// D3: every exit other than the child's own status is said, Ctrl-C too
		xe.state, xe.msg = stateReleased, fmt.Sprintf("the child died of %s from the terminal: released the slot, stopping with it", unix.SignalName(res.Signal))
	case res.ExitStatus < 0: // the guardian was lost while the child ran (D3: 70, not 69's "never started")
		xe.kind, xe.own = errSlotLost, 0
	}
	if h.runErr != nil { // the child ran, but its supervision failed: say so
		xe.state, xe.msg = stateReleased, h.runErr.Error()
	}
	if *xe == (exitError{}) {
		return verdict{ran: true}
	}
	return verdict{ran: true, err: xe}
}

// causeNote is " (cause)" for a cause that is the slot's loss, "" otherwise.
func causeNote(cause error) string {
	if slotrun.SlotLost(cause) {
		return " (" + cause.Error() + ")"
	}
	return ""
}

// notStarted is the end of a command that did not start (runErr says why).
func notStarted(runErr error, sig syscall.Signal) error {
	switch {
	case errors.Is(runErr, unitrun.ErrNotFound), errors.Is(runErr, unitrun.ErrNotExecutable):
		return endf(runErr, stateReleased, "%v", runErr)
	case sig != 0:
		return signalExit(sig, stateReleased, "%v", runErr)
	}
	return endf(errUnavailable, stateReleased, "%v", runErr) // a scope required and not made
}
