package unitrun

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// This file runs in the caller's process (conch): the guardian's events as Run follows them.

// guardianStopMargin is how long past KillAfter Run waits, in direct mode, for the guardian to
// report the command's tree gone after a stop request, before it takes over (D7): it then
// SIGKILLs the guardian, which is stopped (SIGSTOP again after Run's SIGCONT) or hung, and
// kills the command's tree itself. The guardian's own escalation ends at KillAfter, and a
// SIGKILLed tree is gone within milliseconds, so the margin is ample for a working guardian.
const guardianStopMargin = 2 * time.Second

// runRecord is what Run learned from the guardian's events.
type runRecord struct {
	facts      endFacts // for decideResult
	pid        int      // the command's PID once started
	exited     bool     // evExited: the command's whole tree is gone
	cmdExited  bool     // evCmdExited: the command itself was reaped
	cmdEndedAt time.Time
	takenOver  bool // the guardian did not stop the command in time: Run killed it
	killAsked  bool // the guardian was told to SIGKILL at once (ErrNoGrace)
	err        error

	// goUnanswered: the guardian did not answer go within goTimeout and was killed (D7b)
	goUnanswered bool
}

// follow consumes the guardian's events until evExited or its exit, turning ctx's end and
// RuntimeMax into a stop request: "stop" to the guardian, and in scope mode StopScope as well
// (systemd then signals the whole scope, SIGKILL after TimeoutStopSec; the guardian's own
// escalation is the fallback should the bus fail). In scope mode RuntimeMax counts from the
// scope's start, like systemd's RuntimeMaxSec, which backs it up. In direct mode a guardian
// that has not reported the tree gone within the mode's take-over time after the stop request
// is killed (takeOver). The timers it starts are stopped when it returns.
func (r *runner) follow(ctx context.Context) *runRecord {
	rec := &runRecord{}
	r.timers.goAnswer = time.NewTimer(goTimeout)
	check := time.NewTicker(guardianCheckInterval)
	defer check.Stop()
	defer r.timers.stop()
	done := ctx.Done()
	for {
		select {
		case <-check.C: // D7b: a stopped guardian would neither start nor reap the command
			r.g.wakeIfStopped()
		case <-timerC(r.timers.goAnswer):
			r.timers.goAnswer = nil
			r.goUnanswered(rec)
		case <-done:
			done = nil
			r.requestStop(rec, stopByContext, errors.Is(context.Cause(ctx), ErrNoGrace))
		case <-timerC(r.timers.runtimeMax):
			r.timers.runtimeMax = nil
			r.requestStop(rec, stopByRuntimeMax, false)
		case <-r.spec.Deadline.changes():
			if rec.facts.asked == notStopping { // once stopping, the guardian's own bound stands
				r.sendDeadline()
			}
		case <-timerC(r.timers.takeOver):
			r.timers.takeOver = nil
			r.takeOver(rec)
		case ev, ok := <-r.g.events:
			if !ok || r.onEvent(rec, ev) {
				return rec
			}
		}
	}
}

// runTimers are the timers of one Run's follow; nil until started.
type runTimers struct {
	runtimeMax *time.Timer // the stop timing's RuntimeMax, from the start (runMode.runtimeFrom)
	takeOver   *time.Timer // after a stop request, until Run takes over (runMode.stop)
	goAnswer   *time.Timer // from go until the guardian says the command started (D7b)
}

func (t *runTimers) stop() {
	for _, tm := range []*time.Timer{t.runtimeMax, t.takeOver, t.goAnswer} {
		if tm != nil {
			tm.Stop()
		}
	}
}

// timerC is t's channel, nil (never ready) for no timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// requestStop asks the guardian, and the mode, to stop the command, once: the first reason is
// recorded and wins. now asks for SIGKILL at once, without the grace (ErrNoGrace, D7b), also
// when a stop with the grace is under way already.
func (r *runner) requestStop(rec *runRecord, why stopReason, now bool) {
	word := ctlStop
	if now {
		if rec.killAsked {
			return
		}
		rec.killAsked, word = true, ctlKill
	}
	if rec.facts.asked != notStopping && !now {
		return
	}
	first := rec.facts.asked == notStopping
	if first {
		rec.facts.asked = why
	}
	// A stopped guardian (SIGSTOP) would never act on the stop word (D7): continue it, but
	// only once the word is in the pipe, so that a go it has not read yet is withdrawn
	// (readControl) instead of starting the command.
	_ = r.g.send(word)
	_ = r.g.proc.Signal(syscall.SIGCONT)
	if !first {
		return
	}
	after := r.mode.stop()
	if now && after > 0 {
		after = guardianStopMargin // no grace to wait for
	}
	if after > 0 {
		r.timers.takeOver = time.NewTimer(after)
	}
}

// takeOver kills a guardian that still has not reported the tree gone (stopped again or
// hung), which ends its status pipe; the mode's end then kills the tree reparented to this
// process.
func (r *runner) takeOver(rec *runRecord) {
	rec.takenOver = true
	rec.err = fmt.Errorf("%s: %w: did not stop the command within KillAfter %v + %v (stopped or hung): killed", r.spec.Path, ErrGuardian, r.spec.stop.KillAfter, guardianStopMargin)
	_ = r.g.proc.Kill()
}

// onEvent records one event of the guardian; it returns true for evExited, its last.
func (r *runner) onEvent(rec *runRecord, ev guardianEvent) bool {
	switch ev.Event {
	case evStarted:
		rec.pid, rec.facts.started = ev.PID, true
		r.stopGoAnswer()
		r.mode.commandStarted()
		if r.spec.stop.RuntimeMax > 0 {
			r.timers.runtimeMax = time.NewTimer(r.spec.stop.RuntimeMax - time.Since(r.mode.runtimeFrom(time.Now())))
		}
		if r.spec.Started != nil {
			r.spec.Started(rec.pid)
		}
	case evExecError:
		r.stopGoAnswer()
		rec.err = startFailureError(r.spec.Path, ev.Kind, ev.Msg)
	case evCmdExited:
		r.mode.record(rec, ev)
	case evStopSignal:
		rec.facts.systemdStop = true
	case evExited: // the last event: the guardian only exits after it
		rec.exited = true
		rec.facts.reported, rec.facts.status, rec.facts.signal = true, ev.Status, syscall.Signal(ev.Signal)
		rec.facts.guardianFenced = ev.Fenced
		r.mode.record(rec, ev)
		return true
	case evError:
		rec.err = fmt.Errorf("%s: %w: %s", r.spec.Path, ErrGuardian, ev.Msg)
	}
	return false
}

// stopGoAnswer stops the go timer: the guardian answered.
func (r *runner) stopGoAnswer() {
	if r.timers.goAnswer != nil {
		r.timers.goAnswer.Stop()
		r.timers.goAnswer = nil
	}
}

// finish checks, once the guardian has exited, that it reported what it had to. It returns
// the command's PID if it started (0 otherwise), and an error for an exec failure or a
// guardian that died or misbehaved.
func (r *runner) finish(rec *runRecord) (int, error) {
	err := rec.err
	switch {
	case err != nil:
	case rec.pid != 0 && !rec.exited:
		err = fmt.Errorf("%s: %w: exited while the command (pid %d) ran", r.spec.Path, ErrGuardian, rec.pid)
	case rec.pid == 0:
		err = fmt.Errorf("%s: %w: exited without starting the command", r.spec.Path, ErrGuardian)
	}
	if rec.exited {
		err = nil // the command ran and its tree is gone: nothing was lost
	}
	return rec.pid, err
}
