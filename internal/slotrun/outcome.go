package slotrun

import (
	"errors"
	"syscall"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// Holding is what the run knows once the child's supervision returned: unitrun's Result and
// error, and the one cause of the run's context (sema.Holder.Bind over the caller's context):
// nil while nothing asked the child to stop, a cause with a signal (SignalOf) for a signal to
// the process, the holder's error (sema.ErrLeaseLost, ErrFenced, ErrKeyDeleted) for the
// slot's loss.
type Holding struct {
	Result unitrun.Result
	RunErr error
	Cause  error
	// Terminal: the child had the terminal's foreground (D5), so a Ctrl-C or Ctrl-\ reached
	// it and not this process
	Terminal bool
}

// End is how a holding ended (Decide).
type End int

const (
	// Ran: the child ran and ended; Result.ExitStatus is its status (< 0: its guardian was
	// lost, the status is unknown). Signal, when set, is the signal to die of after the
	// release: the process's own, or with FromTerminal the child's SIGINT or SIGQUIT.
	Ran End = iota
	// Requeue: the slot was lost before the command started: queue again (04_sema.md).
	Requeue
	// NotStarted: the command did not start; RunErr says why (unitrun.ErrNotFound,
	// ErrNotExecutable, ErrScopeFailed...), Signal is the process's signal if it got one.
	NotStarted
	// Signalled: the child was stopped (or died of a signal) because the process got Signal.
	Signalled
	// Fenced: the child's guardian stopped it on its own at the lease's deadline, the process
	// being stopped or stalled until then (D7b); Cause is the loss if it was found since.
	Fenced
	// LostLate: the slot was found lost after the lease's deadline: the child was killed at
	// once, without its stop grace (D7b).
	LostLate
	// Lost: the slot was lost while the child ran (Cause): the child was stopped (D7).
	Lost
	// RuntimeExceeded: the child ran past its run-time limit and was stopped.
	RuntimeExceeded
	// Skipped: this period's run is done (D15), so the child was not started (Run only).
	Skipped
	// StateLost: etcd lost or rewound its state while the child ran (sema.ErrStateLost): the
	// child was killed at once, without its stop grace, and the fencing token may be handed
	// out again by the new store (D18).
	StateLost
)

// Outcome is how a holding ended (Decide): End, the signal to die of (Ran, NotStarted,
// Signalled) and the Holding it was decided from.
type Outcome struct {
	End    End
	Signal syscall.Signal
	// FromTerminal: Signal is the child's death by SIGINT or SIGQUIT from the terminal, to
	// be re-raised to the process group so the calling shell script stops (Ran)
	FromTerminal bool
	// KeptUntil: the slot is kept after the run until then (D13, the hold's end by this
	// host's clock); zero when the slot was released (Run sets it, not Decide)
	KeptUntil time.Time
	// Timing is how the child was to be stopped and limited, as the run's plan decided it
	// (D7), for the caller's messages (Run sets it, not Decide)
	Timing unitrun.StopTiming
	Holding
}

// Decide decides how holding h ends (D3, D7): the one pure function from the run's cause and
// unitrun's Result to re-queueing or the end. A slot lost before the command started
// re-queues, unless the command cannot be run at all (unitrun.ErrNotFound,
// ErrNotExecutable). A command that did not start is NotStarted. A child stopped (or killed
// by a signal, or whose scope systemd stopped) while the process got a signal is Signalled.
// A child stopped because the slot was lost is Fenced, StateLost, LostLate or Lost; one stopped at its
// run-time limit RuntimeExceeded. Otherwise it Ran, with the signal the process got just as
// the child ended on its own; or, when the child had the terminal and died of SIGINT or
// SIGQUIT (Ctrl-C, Ctrl-\\), that signal FromTerminal, as with flock(1) and timeout(1) (the
// shells' wait-and-cooperative-exit).
func Decide(h Holding) Outcome {
	o := Outcome{Signal: SignalOf(h.Cause), Holding: h}
	lost := SlotLost(h.Cause)
	cannotRun := errors.Is(h.RunErr, unitrun.ErrNotFound) || errors.Is(h.RunErr, unitrun.ErrNotExecutable)
	res := h.Result
	switch {
	case lost && !res.Started && !cannotRun:
		o.End = Requeue
	case h.RunErr != nil && !res.Started:
		o.End = NotStarted
	case o.Signal != 0 && (res.Stopped || res.ScopeStopped || res.Signal != 0):
		// (a child killed by a signal while the process got one was stopped with it, even if
		// systemd's stop of the scope reached it before the run's own stop request did)
		o.End = Signalled
	case res.Fenced: // D7b: whatever the run learnt after its stall, the guardian stopped the child
		o.End = Fenced
	case lost && res.Stopped && errors.Is(h.Cause, sema.ErrStateLost):
		o.End = StateLost
	case lost && res.Stopped && errors.Is(h.Cause, sema.ErrDeadlinePassed):
		o.End = LostLate
	case lost && res.Stopped:
		o.End = Lost
	case res.RuntimeExceeded:
		o.End = RuntimeExceeded
	case o.Signal == 0 && h.Terminal && (res.Signal == syscall.SIGINT || res.Signal == syscall.SIGQUIT):
		o.End, o.Signal, o.FromTerminal = Ran, res.Signal, true
	}
	if o.End != Ran && o.End != NotStarted && o.End != Signalled {
		o.Signal = 0
	}
	return o
}
