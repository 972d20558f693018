package unitrun

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stopReason records why Run asked the guardian to stop the command; the first reason wins.
type stopReason int

const (
	notStopping stopReason = iota
	stopByContext
	stopByRuntimeMax
)

// fallbackPollInterval is how often Run checks whether the command's process group is gone
// when it has to stop the group itself because the guardian died.
const fallbackPollInterval = 50 * time.Millisecond

// Run starts the command described by spec through a guardian (D7), blocks until the command
// AND everything it left running have ended, and returns how the command ended.
//
// The guardian is this program re-executed (Spec.Guardian; cmd/conch must dispatch GuardianArg
// to GuardianMain). It is the command's parent and a child subreaper, and it gets SIGTERM when
// the caller's process dies, even by SIGKILL, so the command and all its descendants (also
// double-forked or setsid ones) end within KillAfter plus a little whatever happens to conch.
// Spec.BeforeStart runs while the guardian waits, before the command's first instruction (D8).
// When the command exits on its own, whatever it left running is stopped (stop signal, then
// SIGKILL after KillAfter) before Run returns (D7).
//
// Cancelling ctx before the command starts means it never starts: Run returns Result{} and an
// error wrapping context.Cause(ctx). Cancelling ctx afterwards stops the command: StopSignal
// to its process group and to every descendant, reparented ones included, then SIGKILL after
// KillAfter; Run still returns only when the whole tree is gone, with Result.Stopped set (if
// the command was still running) and a nil error: why ctx ended is the caller's to know.
// Spec.RuntimeMax, counted from the start, stops the command the same way and sets
// Result.RuntimeExceeded.
//
// When stdin is a terminal and the caller's process group is its foreground group, the
// command's group gets the terminal while it runs (a command reading the terminal works and
// Ctrl-C reaches only the command) and the caller's group gets it back before Run returns (D5).
//
// Errors: a command that cannot be executed gives Result{ExitStatus: 127 or 126} and an error
// wrapping ErrNotFound or ErrNotExecutable. A BeforeStart error is returned wrapped, the
// command never started. ErrGuardian when the guardian cannot be started or dies before
// reporting: if the command had started, Run then stops its process group itself (same
// escalation), returns Result.Started with ExitStatus -1 (unknown), and descendants that left
// the group may survive. Any other error of the command is in Result, not in the error.
//
// Run starts two goroutines per call, the guardian's locked forking thread (it waits for the
// guardian) and the status-pipe reader; both have ended when Run returns. Concurrent calls are
// allowed, but only one at a time should own the terminal.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Path == "" {
		return Result{ExitStatus: statusNotFound}, fmt.Errorf("%w: empty path", ErrNotFound)
	}
	spec = spec.withDefaults()
	if ctx.Err() != nil {
		return Result{}, notStarted(spec.Path, context.Cause(ctx))
	}
	fg := inForeground(spec.Stdin)
	g, err := startGuardian(spec, fg)
	if err != nil {
		return Result{}, err
	}
	r := &runner{spec: spec, g: g}
	res, err := r.run(ctx)
	if fg {
		// Also after an exec failure: the child took the terminal before its execve failed.
		_ = reclaimForeground(spec.Stdin)
	}
	return res, err
}

// runner is the caller's side of one Run.
type runner struct {
	spec Spec
	g    *guardianProc
}

// run drives the guardian from "ready" to its exit and always waits for that exit.
func (r *runner) run(ctx context.Context) (Result, error) {
	if err := r.awaitReady(ctx); err != nil {
		_ = r.g.close()
		return Result{}, err
	}
	if r.spec.BeforeStart != nil {
		if err := r.spec.BeforeStart(r.g.pid); err != nil {
			_ = r.g.send(ctlAbort)
			_ = r.g.close()
			return Result{}, fmt.Errorf("%s: not started: before-start hook failed: %w", r.spec.Path, err)
		}
	}
	if ctx.Err() != nil {
		_ = r.g.send(ctlAbort)
		_ = r.g.close()
		return Result{}, notStarted(r.spec.Path, context.Cause(ctx))
	}
	_ = r.g.send(ctlGo) // a dead guardian shows up as EOF below
	res, started, err := r.supervise(ctx)
	werr := r.g.close()
	if err == nil || !errors.Is(err, ErrGuardian) {
		return res, err
	}
	if started != 0 {
		killGroupFallback(started, r.spec.StopSignal, r.spec.KillAfter)
	}
	if werr != nil {
		err = fmt.Errorf("%w (guardian: %v)", err, werr)
	}
	return res, err
}

// awaitReady waits for the guardian's ready event. Cancelling ctx makes it return the cause.
func (r *runner) awaitReady(ctx context.Context) error {
	select {
	case ev, ok := <-r.g.events:
		switch {
		case !ok:
			return fmt.Errorf("%s: %w: exited before it was ready", r.spec.Path, ErrGuardian)
		case ev.Event == evReady:
			return nil
		default:
			return fmt.Errorf("%s: %w: %s %s", r.spec.Path, ErrGuardian, ev.Event, ev.Msg)
		}
	case <-ctx.Done():
		return notStarted(r.spec.Path, context.Cause(ctx))
	}
}

// supervise consumes the guardian's events until it exits, turning ctx's end and RuntimeMax
// into a stop request. It returns the result, the command's PID if it started (0 otherwise),
// and an error for an exec failure or a guardian that died or misbehaved.
func (r *runner) supervise(ctx context.Context) (Result, int, error) {
	var (
		res      = Result{ExitStatus: -1}
		pid      int
		reason   stopReason
		exited   bool
		err      error
		done     = ctx.Done()
		runtimeC <-chan time.Time
	)
	requestStop := func(why stopReason) {
		if reason == notStopping {
			reason = why
			_ = r.g.send(ctlStop)
		}
	}
	for {
		select {
		case <-done:
			done = nil
			requestStop(stopByContext)
		case <-runtimeC:
			runtimeC = nil
			requestStop(stopByRuntimeMax)
		case ev, ok := <-r.g.events:
			if !ok {
				return r.finish(res, pid, exited, err)
			}
			switch ev.Event {
			case evStarted:
				pid, res.Started = ev.PID, true
				if r.spec.RuntimeMax > 0 {
					t := time.NewTimer(r.spec.RuntimeMax)
					defer t.Stop()
					runtimeC = t.C
				}
				if r.spec.Started != nil {
					r.spec.Started(pid)
				}
			case evExecError:
				res.ExitStatus = ev.Status
				err = startFailureError(r.spec.Path, ev.Status, ev.Msg)
			case evExited:
				exited = true
				res.ExitStatus, res.Signal = ev.Status, syscall.Signal(ev.Signal)
				res.Stopped = ev.Stopped && reason == stopByContext
				res.RuntimeExceeded = ev.Stopped && reason == stopByRuntimeMax
			case evError:
				err = fmt.Errorf("%s: %w: %s", r.spec.Path, ErrGuardian, ev.Msg)
			}
		}
	}
}

// finish checks, once the guardian has exited, that it reported what it had to.
func (r *runner) finish(res Result, pid int, exited bool, err error) (Result, int, error) {
	switch {
	case err != nil:
	case pid != 0 && !exited:
		err = fmt.Errorf("%s: %w: exited while the command (pid %d) ran", r.spec.Path, ErrGuardian, pid)
	case pid == 0:
		err = fmt.Errorf("%s: %w: exited without starting the command", r.spec.Path, ErrGuardian)
	}
	if exited {
		err = nil // the command ran and its tree is gone: nothing was lost
	}
	return res, pid, err
}

// notStarted is the error for a command that was not started because ctx ended.
func notStarted(path string, cause error) error {
	return fmt.Errorf("%s: not started: %w", path, cause)
}

// killGroupFallback stops process group pgid without the guardian: sig, then SIGKILL once
// killAfter has passed with members left. It blocks for at most killAfter.
func killGroupFallback(pgid int, sig syscall.Signal, killAfter time.Duration) {
	_ = signalGroup(pgid, sig)
	deadline := time.Now().Add(killAfter)
	tick := time.NewTicker(fallbackPollInterval)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) {
			return
		}
		<-tick.C
	}
	_ = signalGroup(pgid, syscall.SIGKILL)
}
