package slotrun

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// Errors that end a run before its child starts (Run).
var (
	// ErrNoScope: the child must run in a systemd scope (unitrun.ScopeAlways) and none can
	// be made (D8); it wraps the reason
	ErrNoScope = errors.New("cannot run the child in a systemd scope")
	// ErrPeriodUnknown: the period's marker cannot be read (D15), so the child was not
	// started (no silent double run); it wraps the reason
	ErrPeriodUnknown = errors.New("cannot read this period's marker, so the command was not started")
)

// NoSlotError is the end of a wait that got no slot: Err is sema.Acquire's error (a
// *sema.WaitError, sema.ErrRefused...) or the context's cause, Signal the signal the process
// got while waiting or connecting (0: none), Enqueued whether etcd had answered our enqueue
// (a key of ours was written; with a signal, it is gone now).
type NoSlotError struct {
	Err      error
	Signal   syscall.Signal
	Enqueued bool
}

func (e *NoSlotError) Error() string { return e.Err.Error() }

// Unwrap is Err, for errors.Is and errors.As.
func (e *NoSlotError) Unwrap() error { return e.Err }

// holdOnce acquires a slot and runs the command in it. again is true when the slot was lost
// before the command started, so the caller re-enters.
func (r *run) holdOnce() (o Outcome, again bool, err error) {
	h, err := r.sem.Acquire(r.waitCtx)
	if err != nil {
		return o, false, &NoSlotError{Err: err, Signal: SignalOf(context.Cause(r.waitCtx)), Enqueued: r.enqueued.Load()}
	}
	if err := r.planning.wait(r.rep); err != nil { // a scope required and none (D8): the child never starts
		_ = h.Release(context.Background())
		return o, false, err
	}
	// one context, one cause: the caller's signal or the slot's loss (D7)
	runCtx, unbind := h.Bind(r.sigCtx)
	defer unbind()
	stopNotify := context.AfterFunc(runCtx, func() {
		if cause := context.Cause(runCtx); SlotLost(cause) {
			r.rep.Stopping(cause) // D10: the fence begins
		}
	})
	defer stopNotify()
	if skip, err := r.onceSkip(h); skip { // D15: this period's run is done
		_ = h.Release(context.Background())
		return Outcome{End: Skipped}, false, err
	}
	heldAt := time.Now()
	if o = r.runChild(runCtx, h); o.End == Requeue {
		r.rep.Note(Note{Kind: Requeued, Err: context.Cause(runCtx)})
		_ = h.Release(context.Background())
		return o, true, nil
	}
	r.closePeriod(h, o, heldAt)                                       // D15: a successful run closes the period
	if ended, ha := r.keepAfter(h, o, context.Cause(runCtx)); ended { // D13: kept, or released saying why
		if ha.Key != "" {
			o.KeptUntil = ha.Until
		}
		return o, false, nil
	}
	// The slot first: the reporter's end line may wait for the child's last output to reach
	// the journal (its guardian's exit), which must not keep the next holder waiting.
	relErr := h.Release(context.Background())
	if o.End == Ran {
		r.rep.Released(o.Result.ExitStatus, time.Since(heldAt))
	}
	if relErr != nil {
		r.rep.Note(Note{Kind: ReleaseFailed, Err: relErr, TTL: h.TTL()})
	}
	return o, false, nil
}

// runChild runs the command under runCtx while h holds the slot, as the run's plan says, with
// the prestarted guardian, and decides how the holding ended (Decide).
func (r *run) runChild(runCtx context.Context, h *sema.Holder) Outcome {
	terminal := ownsTerminal(r.cfg.Stdio.Stdin) // then the child gets it (D5)
	// D7b: no grace once the lease's deadline has passed
	stopCtx, unstop := noGraceWhenLate(runCtx)
	defer unstop()
	stopWatch := r.watchEscalation(runCtx, time.Now()) // a note when the stop moves to SIGKILL
	unit := r.scopeUnit(h.Rev())
	spec := r.childSpec(h.Rev(), int64(h.Lease()), h.ClusterID())
	unit.Started = func(pid int) { r.rep.Started(pid, unit.Name) }
	res, runErr := r.pre.Run(stopCtx, spec, unit, func(err error) {
		r.rep.Note(Note{Kind: ScopeFailed, Err: err})
	})
	stopWatch()
	return Decide(Holding{Result: res, RunErr: runErr, Cause: context.Cause(runCtx), Terminal: terminal})
}

// scopeUnit is the scope of the holding of the key created at rev (D8):
// conch-sema-<name>-<rev>.scope.
func (r *run) scopeUnit(rev int64) unitrun.ScopeUnit {
	return unitrun.ScopeUnit{Name: systemd.ScopeName(r.cfg.Name, rev),
		Description: fmt.Sprintf("conch sema %s[max=%d], holder rev %d", r.cfg.Name, r.cfg.Max, rev)}
}

// preloadSpec is the spec and scope unit the prestarter preloads for the key created at rev
// with lease (what runChild will give it once it holds).
func (r *run) preloadSpec(rev, lease int64) (unitrun.Spec, unitrun.ScopeUnit) {
	return r.childSpec(rev, lease, r.cluster.Load()), r.scopeUnit(rev)
}

// childSpec is what unitrun runs while the key created at rev, bound to lease and granted by
// the etcd cluster of ID cluster (D18), holds the slot.
func (r *run) childSpec(rev, lease int64, cluster uint64) unitrun.Spec {
	return unitrun.Spec{
		Path:     r.cfg.Path,
		Args:     r.cfg.Args,
		Env:      ChildEnv(r.cfg.Env, r.cfg.Name, r.cfg.Max, rev, lease, cluster),
		Stdin:    r.cfg.Stdio.Stdin,
		Stdout:   r.cfg.Stdio.Stdout,
		Stderr:   r.cfg.Stdio.Stderr,
		Deadline: r.deadline, // D7b
		Started:  func(pid int) { r.rep.Started(pid, "") },
		Warn:     func(msg string) { r.rep.Note(Note{Kind: Supervision, Err: errors.New(msg)}) },
	}
}
