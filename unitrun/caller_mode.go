package unitrun

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// This file runs in the caller's process (conch): what differs between direct mode and scope
// mode (D8) on the caller's side of the guardian pipe. The guardian's side has guardianMode.

// runMode is one Run's mode: directMode, or *scopeRun for scope mode. Run picks it once
// (newRunMode) and never asks again which mode it is in.
type runMode interface {
	// wire is what the guardian is told about the mode: the scope it lives in, nil in
	// direct mode.
	wire() *wireScope
	// beforeStart runs once the guardian is ready and before the command starts: scope mode
	// creates the scope with the guardian in it (unless it was prepared ahead, D8b). An error
	// means the command must not start.
	beforeStart(ctx context.Context, spec Spec, guardianPID int) error
	// commandStarted runs when the guardian reports the command started: a scope prepared ahead gets
	// its holder's Description (D8b).
	commandStarted()
	// runtimeFrom is when the stop timing's RuntimeMax starts counting, now being the command's start.
	runtimeFrom(now time.Time) time.Time
	// stop does the mode's part of a stop Run asks for, once: in scope mode StopScope begins.
	// It returns how long Run then waits for the guardian's evExited before it takes over
	// (direct mode: a stopped or hung guardian, D7), 0 for never.
	stop() time.Duration
	// record takes the facts of evCmdExited and evExited that depend on the mode.
	record(rec *runRecord, ev guardianEvent)
	// end completes the run once the guardian's events have ended (follow returned):
	// it waits for what proves the command's tree gone and returns Run's result.
	end(r *runner, rec *runRecord) (Result, error)
}

// newRunMode returns the mode spec asks for (spec has its defaults and scope timing).
func newRunMode(spec Spec) runMode {
	if spec.scope == nil {
		return directMode{killAfter: spec.stop.KillAfter}
	}
	sc := &scopeRun{scopeSpec: *spec.scope, killAfter: spec.stop.KillAfter, runtimeMax: spec.stop.RuntimeMax}
	if sc.Timeout <= 0 {
		sc.Timeout = defaultScopeTimeout
	}
	return sc
}

// directMode is Run without a scope: the guardian alone stops the command's tree, and Run
// takes over when the guardian fails (D7).
type directMode struct{ killAfter time.Duration }

func (directMode) wire() *wireScope { return nil }

func (directMode) beforeStart(context.Context, Spec, int) error { return nil }

func (directMode) commandStarted() {}

func (directMode) runtimeFrom(now time.Time) time.Time { return now }

func (d directMode) stop() time.Duration { return d.killAfter + guardianStopMargin }

func (directMode) record(rec *runRecord, ev guardianEvent) {
	if ev.Event == evExited { // the guardian's own word on whether the command still ran
		rec.facts.endedFirst = !ev.Stopped
	}
}

func (directMode) end(r *runner, rec *runRecord) (Result, error) { return directEnd(r, rec) }

// directEnd returns the result once the guardian reported the tree gone (it is left exiting,
// for prepared.close to join), or waits for the guardian's exit and, when it died or was
// killed while the command ran, stops the command's tree itself (stopOrphans).
func directEnd(r *runner, rec *runRecord) (Result, error) {
	started, err := r.finish(rec)
	res := decideResult(rec.facts)
	if rec.exited {
		return res, nil
	}
	werr := r.g.close()
	if rec.goUnanswered { // D7b: whatever the killed guardian may have started goes too
		stopOrphans(0, syscall.SIGKILL, 0)
	}
	if err == nil || !errors.Is(err, ErrGuardian) {
		return res, err
	}
	if started != 0 {
		grace := r.spec.stop.KillAfter
		if rec.takenOver {
			grace = 0 // the stop signal's grace has passed already: SIGKILL at once
		}
		stopOrphans(started, r.spec.stop.StopSignal, grace)
		err = fmt.Errorf("%w; Run stopped the command and its descendants itself", err)
	}
	if werr != nil {
		err = fmt.Errorf("%w (guardian: %v)", err, werr)
	}
	return res, err
}

// Scope mode's runMode (the rest of scopeRun is in scope_run.go).

func (sc *scopeRun) beforeStart(ctx context.Context, spec Spec, guardianPID int) error {
	if sc.prepared {
		return nil // the guardian waits in its scope already (D8b)
	}
	return sc.start(ctx, spec, guardianPID)
}

func (sc *scopeRun) commandStarted() { sc.relabel() }

func (sc *scopeRun) runtimeFrom(time.Time) time.Time { return sc.started } // as RuntimeMaxSec

func (sc *scopeRun) stop() time.Duration {
	sc.beginStop()
	return 0 // systemd's TimeoutStopSec escalates; the scope's end is waited for in end
}

func (sc *scopeRun) record(rec *runRecord, ev guardianEvent) {
	if ev.Event == evCmdExited && !rec.cmdExited {
		rec.cmdExited, rec.cmdEndedAt = true, time.Now()
		rec.facts.endedFirst = rec.facts.asked == notStopping
		rec.facts.reported, rec.facts.status, rec.facts.signal = true, ev.Status, syscall.Signal(ev.Signal)
	}
}

// end returns at once when the guardian reported the tree gone and no stop is under way (the
// scope is empty then, and systemd collects it on its own, CollectMode: waiting would add a
// round trip). Otherwise only the scope's end proves the tree is gone: it waits for the
// guardian's exit and for the scope to be gone.
func (sc *scopeRun) end(r *runner, rec *runRecord) (Result, error) {
	_, err := r.finish(rec)
	if rec.exited && sc.stopping == nil {
		return sc.outcome(rec, err, nil, nil)
	}
	werr := r.g.close()
	return sc.outcome(rec, err, werr, sc.awaitGone())
}
