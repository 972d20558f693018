package unitrun

import (
	"context"
	"fmt"
	"time"
)

// This file runs in the caller's process (conch): one Run driving its guardian from "ready"
// to the command's end.

// runner is the caller's side of one Run.
type runner struct {
	spec   Spec
	g      *guardianProc
	mode   runMode
	timers runTimers // follow's
	ready  bool      // the guardian's ready was received already (a scope prepared ahead, D8b)
}

// run drives the guardian from "ready" to evExited, or to its exit when it does not report
// that, and then waits for the scope to be gone if one is being stopped. It waits for the
// guardian's exit (close) on every path but the one where the guardian reported evExited
// and no scope is being stopped: the caller's prepared.close joins it then.
func (r *runner) run(ctx context.Context) (Result, error) {
	if !r.ready {
		if err := r.awaitReady(ctx); err != nil {
			_ = r.g.close()
			return Result{}, err
		}
	}
	if err := r.beforeGo(ctx); err != nil {
		return Result{}, r.abort(err)
	}
	r.sendDeadline()    // D7b: the guardian knows the deadline before it starts anything
	_ = r.g.send(ctlGo) // a dead guardian shows up as EOF below
	return r.mode.end(r, r.follow(ctx))
}

// sendDeadline sends the guardian the caller's latest Deadline, if there is one (D7b).
func (r *runner) sendDeadline() {
	if w := r.spec.Deadline.word(); w != "" {
		_ = r.g.send(w)
	}
}

// beforeGo does what must precede the command's start once the guardian is ready: the scope
// (D8), BeforeStart, a last look at ctx. An error means the command must not start.
func (r *runner) beforeGo(ctx context.Context) error {
	if err := r.mode.beforeStart(ctx, r.spec, r.g.pid); err != nil {
		return err
	}
	if r.spec.BeforeStart != nil {
		if err := r.spec.BeforeStart(r.g.pid); err != nil {
			return fmt.Errorf("%s: not started: before-start hook failed: %w", r.spec.Path, err)
		}
	}
	if ctx.Err() != nil {
		return notStarted(r.spec.Path, context.Cause(ctx))
	}
	return nil
}

// abort tells the guardian to exit without starting the command and waits for it. It returns
// err. In scope mode the scope, if it was created, held only the guardian: empty now, systemd
// collects it (CollectMode). It is not stopped here: when StartScope failed, a unit of that
// name may be someone else's (ErrUnitExists).
func (r *runner) abort(err error) error {
	_ = r.g.send(ctlAbort)
	_ = r.g.close()
	return err
}

// awaitReady waits for the guardian's ready event. Cancelling ctx makes it return the cause.
// A guardian found stopped meanwhile is woken; one that is not ready in time (hung)
// is killed, and the error wraps errNotReady (D7b). readyTimeout counts from the call.
func (r *runner) awaitReady(ctx context.Context) error {
	check := time.NewTicker(guardianCheckInterval)
	defer check.Stop()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		select {
		case <-check.C:
			r.g.wakeIfStopped()
		case <-deadline.C:
			_ = r.g.proc.Kill() // it started nothing: no go was sent
			return fmt.Errorf("%s: not started: %w", r.spec.Path, errNotReady)
		case ev, ok := <-r.g.events:
			switch {
			case !ok:
				return fmt.Errorf("%s: %w: exited before it was ready", r.spec.Path, ErrGuardian)
			case ev.Event == evHello: // checked by prepared.trust where it matters (D7a)
			case ev.Event == evReady:
				return nil
			default:
				return fmt.Errorf("%s: %w: %s %s", r.spec.Path, ErrGuardian, ev.Event, ev.Msg)
			}
		case <-ctx.Done():
			return notStarted(r.spec.Path, context.Cause(ctx))
		}
	}
}

// notStarted is the error for a command that was not started because ctx ended.
func notStarted(path string, cause error) error {
	return fmt.Errorf("%s: not started: %w", path, cause)
}
