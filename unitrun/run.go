package unitrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fallbackPollInterval is how often Run checks whether the command's process group is gone
// when it has to stop the group itself because the guardian died.
const fallbackPollInterval = 50 * time.Millisecond

// guardianStopMargin is how long past KillAfter Run waits, in direct mode, for the guardian to
// report the command's tree gone after a stop request, before it takes over (D7): it then
// SIGKILLs the guardian, which is stopped (SIGSTOP again after Run's SIGCONT) or hung, and
// kills the command's tree itself. The guardian's own escalation ends at KillAfter, and a
// SIGKILLed tree is gone within milliseconds, so the margin is ample for a working guardian.
const guardianStopMargin = 2 * time.Second

// Run starts the command described by spec through a guardian (D7), blocks until the command
// AND everything it left running have ended, and returns how the command ended. It is Prepare,
// Prepared.Run and Prepared.Close in one call: callers that can start the guardian earlier, to
// hide its start-up behind other work, use those.
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
// reporting: if the command had started, Run then stops its tree itself (same escalation; the
// caller is a child subreaper, so the command and its descendants, setsid ones included, are
// reparented to it when the guardian dies) and returns Result.Started with ExitStatus -1
// (unknown). This also covers a guardian stopped (SIGSTOP) or hung while Run stops the
// command: Run sends it SIGCONT with the stop request and, in direct mode, if it has not
// reported the tree gone within KillAfter plus guardianStopMargin, SIGKILLs it and SIGKILLs
// the tree; Result.Stopped or RuntimeExceeded is then set as for a normal stop. The caller
// must start no children of its own besides guardians that it does not mind being stopped by
// this fallback (cmd/conch starts none). Nothing in this process can help when the caller is
// SIGKILLed while its guardian is stopped: the guardian acts on its parent-death signal only
// once someone sends it SIGCONT. Any other error of the command is in Result, not in the
// error.
//
// Scope mode (Spec.Scope, D8): once the guardian is ready, Run creates the transient scope
// with the guardian in it (ScopeSpec; in the caller's service's slice, bound to that service
// and with its limits when the caller runs in one) and only then lets it start the command, so
// the command is in the scope from its first instruction. Stopping (ctx, RuntimeMax) is
// StopScope: systemd sends the scope's KillSignal to every process in it and SIGKILL after
// TimeoutStopSec (KillAfter); the guardian survives the stop signal to report the command's
// status, and stops the scope itself if the caller dies (D7). Run returns once the scope is
// gone, or, after the command exited on its own, once the guardian saw its whole tree end
// (systemd then collects the empty scope by itself). A scope that cannot be created gives an
// error wrapping ErrScopeFailed with Result.Started false (D3: the caller exits 69 or retries
// in direct mode); when ctx ends meanwhile, the error wraps its cause instead. When systemd
// stops the scope on its own (the caller's service stopping, an operator), the result is the
// command's status, with neither Stopped nor RuntimeExceeded set unless RuntimeMax had passed.
//
// Run starts two goroutines per call, the guardian's locked forking thread (it waits for the
// guardian) and the status-pipe reader, and in scope mode one more for StopScope; all have
// ended when Run returns. Concurrent calls are allowed, but only one at a time should own the
// terminal.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if err := spec.check(); err != nil {
		return Result{ExitStatus: statusFor(err)}, err
	}
	if ctx.Err() != nil {
		return Result{}, notStarted(spec.Path, context.Cause(ctx))
	}
	p, err := Prepare(spec)
	if err != nil {
		return Result{}, err
	}
	defer p.Close()
	return p.Run(ctx, spec)
}

// Prepared is a guardian (D7) started by Prepare ahead of its command: a process that has
// done its start-up and waits, blocked, for Run or Close. It is not safe for concurrent use.
type Prepared struct {
	g     *guardianProc
	start Spec // Guardian, Stdin, Stdout and Stderr as the guardian got them
	used  bool // Run was called
}

// Prepare starts the guardian of a command that Prepared.Run will start later, so that the
// guardian's start-up (the re-execution of this program: several milliseconds) overlaps
// whatever the caller does meanwhile, such as acquiring the slot. It uses only spec's
// Guardian, Stdin, Stdout and Stderr, which the guardian gets at its start; everything else,
// the command included, is given to Run. It does not block beyond the guardian's fork and exec.
//
// The guardian waits without running anything; it exits when Close is called, when the
// caller's process dies, even by SIGKILL (its parent-death signal, or the EOF of its control
// pipe), or after Run. The result must be closed, also after Run (Close then joins the
// guardian, which Run may leave exiting). Errors wrap ErrGuardian.
//
// Prepare starts the guardian's locked forking thread and its status-pipe reader; Close ends
// both.
func Prepare(spec Spec) (*Prepared, error) {
	spec = spec.withDefaults()
	g, err := startGuardian(spec)
	if err != nil {
		return nil, err
	}
	return &Prepared{g: g, start: spec}, nil
}

// Run runs the command of spec with the prepared guardian, exactly as the package-level Run
// does (see there for the blocking, ctx, Result and errors), except that it returns as soon as
// the guardian reports that the command and everything it left running are gone, without
// waiting for the guardian's own exit: Close joins that. So the caller can act on the result
// (release the slot, D7) while the guardian exits.
//
// spec is the whole Spec; its Guardian, Stdin, Stdout and Stderr must be those given to
// Prepare (the guardian already has them), else Run does not start the command and returns an
// error wrapping ErrGuardian. Run may be called once; a second call, or a call after Close,
// returns an error wrapping ErrGuardian. Nothing about the command is decided before Run: the
// environment, the scope (D8), the terminal's foreground (D5) are all taken from spec here.
// A guardian found dead when Run is called (killed while it waited) is replaced by a fresh
// one; one that dies after that gives ErrGuardian, as in the package-level Run.
func (p *Prepared) Run(ctx context.Context, spec Spec) (Result, error) {
	if p.used || p.g.closed {
		return Result{}, fmt.Errorf("%s: not started: %w: prepared guardian already used", spec.Path, ErrGuardian)
	}
	p.used = true
	if err := spec.check(); err != nil {
		_ = p.g.close()
		return Result{ExitStatus: statusFor(err)}, err
	}
	spec = spec.withScope().withDefaults()
	if !p.start.sameStart(spec) {
		_ = p.g.close()
		return Result{}, fmt.Errorf("%s: not started: %w: guardian prepared with another Guardian, Stdin, Stdout or Stderr", spec.Path, ErrGuardian)
	}
	if ctx.Err() != nil {
		_ = p.g.close()
		return Result{}, notStarted(spec.Path, context.Cause(ctx))
	}
	if p.g.gone() { // killed while it waited (OOM killer, operator): take a fresh one
		_ = p.g.close()
		g, err := startGuardian(p.start)
		if err != nil {
			return Result{}, fmt.Errorf("%s: not started: %w", spec.Path, err)
		}
		p.g = g
	}
	r := &runner{spec: spec, g: p.g, mode: newRunMode(spec)}
	fg := inForeground(spec.Stdin)
	if err := p.g.sendSpec(spec, fg, r.mode.wire()); err != nil {
		_ = p.g.close()
		return Result{}, fmt.Errorf("%s: not started: %w", spec.Path, err)
	}
	res, err := r.run(ctx)
	if fg {
		// Also after an exec failure: the child took the terminal before its execve failed.
		_ = reclaimForeground(spec.Stdin)
	}
	return res, err
}

// Close ends the prepared guardian and waits for it to exit: before Run, the guardian is
// killed (it has started nothing); after Run, it is already exiting or gone, and Close only
// joins it and the goroutines Prepare started. It blocks for as long as the guardian takes to
// exit (milliseconds). Calling it more than once is harmless.
func (p *Prepared) Close() {
	_ = p.g.close()
}

// check validates what Run needs before anything starts.
func (s Spec) check() error {
	if s.Path == "" {
		return fmt.Errorf("%w: empty path", ErrNotFound)
	}
	if s.Scope != nil && (s.Scope.Conn == nil || s.Scope.Name == "") {
		return fmt.Errorf("%s: not started: %w: no connection or no unit name", s.Path, ErrScopeFailed)
	}
	return nil
}

// statusFor is the Result.ExitStatus that goes with a check error.
func statusFor(err error) int {
	if errors.Is(err, ErrNotFound) {
		return statusNotFound
	}
	return 0
}

// runner is the caller's side of one Run.
type runner struct {
	spec Spec
	g    *guardianProc
	mode runMode
}

// supervision is what Run learned from the guardian's events.
type supervision struct {
	facts      endFacts // for decideResult
	pid        int      // the command's PID once started
	exited     bool     // evExited: the command's whole tree is gone
	cmdExited  bool     // evCmdExited: the command itself was reaped
	cmdEndedAt time.Time
	takenOver  bool // the guardian did not stop the command in time: Run killed it
	err        error
}

// run drives the guardian from "ready" to evExited, or to its exit when it does not report
// that, and then waits for the scope to be gone if one is being stopped. It waits for the
// guardian's exit (close) on every path but the one where the guardian reported evExited
// and no scope is being stopped: the caller's Prepared.Close joins it then.
func (r *runner) run(ctx context.Context) (Result, error) {
	if err := r.awaitReady(ctx); err != nil {
		_ = r.g.close()
		return Result{}, err
	}
	if err := r.beforeGo(ctx); err != nil {
		return Result{}, r.abort(err)
	}
	_ = r.g.send(ctlGo) // a dead guardian shows up as EOF below
	return r.mode.end(r, r.supervise(ctx))
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

// supervise consumes the guardian's events until evExited or its exit, turning ctx's end and RuntimeMax
// into a stop request: "stop" to the guardian, and in scope mode StopScope as well (systemd
// then signals the whole scope, SIGKILL after TimeoutStopSec; the guardian's own escalation
// is the fallback should the bus fail). In scope mode RuntimeMax counts from the scope's
// start, like systemd's RuntimeMaxSec, which backs it up.
func (r *runner) supervise(ctx context.Context) *supervision {
	st := &supervision{}
	var (
		done     = ctx.Done()
		runtimeC <-chan time.Time
		stuck    *time.Timer
		stuckC   <-chan time.Time
	)
	defer func() {
		if stuck != nil {
			stuck.Stop()
		}
	}()
	requestStop := func(why stopReason) {
		if st.facts.asked == notStopping {
			st.facts.asked = why
			// A stopped guardian (SIGSTOP) would never act on the stop word (D7).
			_ = r.g.proc.Signal(syscall.SIGCONT)
			_ = r.g.send(ctlStop)
			if after := r.mode.stop(); after > 0 {
				stuck = time.NewTimer(after)
				stuckC = stuck.C
			}
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
		case <-stuckC:
			// Still no evExited: the guardian is stopped again or hung. Kill it, which ends
			// its status pipe; run then kills the tree reparented to this process.
			stuckC = nil
			st.takenOver = true
			st.err = fmt.Errorf("%s: %w: did not stop the command within KillAfter %v + %v (stopped or hung): killed", r.spec.Path, ErrGuardian, r.spec.KillAfter, guardianStopMargin)
			_ = r.g.proc.Kill()
		case ev, ok := <-r.g.events:
			if !ok {
				return st
			}
			switch ev.Event {
			case evStarted:
				st.pid, st.facts.started = ev.PID, true
				if r.spec.RuntimeMax > 0 {
					t := time.NewTimer(r.spec.RuntimeMax - time.Since(r.mode.runtimeFrom(time.Now())))
					defer t.Stop()
					runtimeC = t.C
				}
				if r.spec.Started != nil {
					r.spec.Started(st.pid)
				}
			case evExecError:
				st.facts.reported, st.facts.status = true, ev.Status
				st.err = startFailureError(r.spec.Path, ev.Status, ev.Msg)
			case evCmdExited:
				r.mode.record(st, ev)
			case evStopSignal:
				st.facts.systemdStop = true
			case evExited: // the last event: the guardian only exits after it
				st.exited = true
				st.facts.reported, st.facts.status, st.facts.signal = true, ev.Status, syscall.Signal(ev.Signal)
				r.mode.record(st, ev)
				return st
			case evError:
				st.err = fmt.Errorf("%s: %w: %s", r.spec.Path, ErrGuardian, ev.Msg)
			}
		}
	}
}

// finish checks, once the guardian has exited, that it reported what it had to. It returns
// the command's PID if it started (0 otherwise), and an error for an exec failure or a
// guardian that died or misbehaved.
func (r *runner) finish(st *supervision) (int, error) {
	err := st.err
	switch {
	case err != nil:
	case st.pid != 0 && !st.exited:
		err = fmt.Errorf("%s: %w: exited while the command (pid %d) ran", r.spec.Path, ErrGuardian, st.pid)
	case st.pid == 0:
		err = fmt.Errorf("%s: %w: exited without starting the command", r.spec.Path, ErrGuardian)
	}
	if st.exited {
		err = nil // the command ran and its tree is gone: nothing was lost
	}
	return st.pid, err
}

// notStarted is the error for a command that was not started because ctx ended.
func notStarted(path string, cause error) error {
	return fmt.Errorf("%s: not started: %w", path, cause)
}

// stopOrphans stops, without the guardian, every descendant of this process that is not a
// live guardian or below one: after a guardian's death the command and its descendants are
// reparented here (the caller is a child subreaper, D7). It sends sig, then SIGCONT, to them
// and to process group pgid while its leader is still an unreaped child of ours (so the PGID
// is certainly the command's), then SIGKILL once grace has passed (at once for grace <= 0),
// again every fallbackPollInterval, reaping each child of ours that ends (by PID, never
// wait4(-1): the guardians' waits are os/exec's). It returns once none is left.
func stopOrphans(pgid int, sig syscall.Signal, grace time.Duration) {
	self := os.Getpid()
	// send signals every orphan and reaps those that have ended; it reports whether any
	// was left.
	send := func(sigs ...syscall.Signal) bool {
		procs, err := descendantsExcept(guardianSet())
		if err != nil {
			// Cannot list /proc: at least the group, as long as there is a signal to send
			// (until SIGKILL, which ends the wait: nothing more can be learnt).
			for _, s := range sigs {
				_ = signalGroup(pgid, s)
			}
			return len(sigs) == 0 || sigs[0] != syscall.SIGKILL
		}
		for _, s := range sigs {
			for _, p := range procs {
				if p.pid == pgid && p.ppid == self {
					_ = signalGroup(pgid, s)
				}
				_ = signalProc(p, s)
			}
		}
		for _, p := range procs {
			if p.ppid == self {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(p.pid, &ws, unix.WNOHANG|unix.WALL, nil)
			}
		}
		return len(procs) > 0
	}
	first := []syscall.Signal{syscall.SIGKILL}
	if grace > 0 {
		first = []syscall.Signal{sig}
		if sig != syscall.SIGCONT && sig != syscall.SIGKILL {
			first = append(first, syscall.SIGCONT)
		}
	}
	left := send(first...)
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(fallbackPollInterval)
	defer tick.Stop()
	for left {
		<-tick.C
		if time.Now().Before(deadline) {
			left = send()
		} else {
			left = send(syscall.SIGKILL)
		}
	}
}
