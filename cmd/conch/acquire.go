package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
	"golang.org/x/sys/unix"
)

// errSignal is the cancellation cause when conch gets SIGTERM, SIGINT or
// SIGHUP: it stops the child, releases, then re-raises (D3, D7).
type errSignal struct{ sig syscall.Signal }

func (e errSignal) Error() string { return "received " + unix.SignalName(e.sig) }

// acquire is the main job: wait for a slot, run the command while the slot
// is safely held, release. It returns the exit status (D3) or the signal to
// re-raise.
func (c *semaCmd) acquire(j job) (int, syscall.Signal) {
	rep := newReporter(c.stderr, c.getenv, c.Verbose, j.name, j.max)
	defer startWatchdog(rep.notify)()
	ctx, stopSignals := signalContext()
	defer stopSignals()
	signalled := func() syscall.Signal {
		var es errSignal
		if errors.As(context.Cause(ctx), &es) {
			return es.sig
		}
		return 0
	}

	// The guardian starts now, so that its start-up overlaps the D-Bus and etcd round trips;
	// it is closed while we wait behind others (D7).
	stdio := unitrun.Spec{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	pre := startPrestarter(stdio)
	defer func() { pre.close() }() // after the release below: the guardian's exit is not waited for first

	plan, status := openScope(rep, j.scope) // D8: before any etcd call
	if plan == nil {
		return status, 0
	}
	defer plan.close()
	client, err := newClient(j.conn)
	if err != nil {
		rep.errorf("", "%v", err)
		return clientStatus(err), 0
	}
	defer client.Close()
	killAfter := j.scope.killAfter(c.KillAfter.d) // -p TimeoutStopSec= wins in a scope
	if killAfter <= 0 {
		killAfter = unitrun.DefaultKillAfter
	}
	if sema.FenceTooLate(c.TTL.d, killAfter) {
		rep.warnf("WARNING: --kill-after %v is too long to stop the child before a --ttl %v lease could expire; conch will stop it at the first failed keep-alive (use --ttl %v or more to stop it only when the lease is really at risk)", killAfter, sema.RoundTTL(c.TTL.d), minTTL(killAfter))
	}
	host, _ := os.Hostname()
	s, err := sema.New(client, j.name, j.max, sema.Options{
		TTL:            c.TTL.d,
		ConnectTimeout: j.conn.DialTimeout,
		FenceMargin:    killAfter + time.Second, // D7
		Nonblock:       c.Nonblock || (j.waitSet && j.wait == 0),
		Record:         sema.Record{Host: host, PID: os.Getpid(), Unit: ownUnit(), Scope: plan.inScope()},
		OnEvent:        func(e sema.Event) { rep.onEvent(e); pre.onEvent(e) },
	})
	if err != nil {
		rep.errorf("", "%v", err)
		return exitUsage, 0
	}

	waitCtx, cancelWait := ctx, context.CancelFunc(func() {})
	if j.waitSet && j.wait > 0 {
		waitCtx, cancelWait = context.WithTimeout(ctx, j.wait)
	}
	defer cancelWait()
	for {
		status, sig, again := c.holdAndRun(ctx, waitCtx, j, rep, s, plan, pre, stdio, killAfter, signalled)
		if !again {
			return status, sig
		}
		// the slot was lost before the command could start: the command
		// never ran, so queue again while --wait allows (04_sema.md
		// "Failure behavior"), with a fresh guardian
		pre.close()
		pre = startPrestarter(stdio)
	}
}

// holdAndRun acquires a slot and runs the command in it. again is true when
// the slot was lost before the command started, so the caller re-enters.
func (c *semaCmd) holdAndRun(ctx, waitCtx context.Context, j job, rep *reporter, s *sema.Semaphore, plan *scopePlan,
	pre *prestarter, stdio unitrun.Spec, killAfter time.Duration, signalled func() syscall.Signal) (status int, sig syscall.Signal, again bool) {
	h, err := s.Acquire(waitCtx)
	waitRanOut := waitCtx.Err() != nil && ctx.Err() == nil
	if err != nil {
		if sig := signalled(); sig != 0 {
			rep.errorf(stateTimeout, "%s while waiting: left the queue", unix.SignalName(sig))
			return 0, sig, false
		}
		switch {
		case errors.Is(err, sema.ErrRefused):
			rep.errorf(stateTimeout, "%v (check --user, --password-file and the user's permissions on %s)", err, sema.NamePrefix(j.name))
			return exitUsage, 0, false
		case errors.Is(err, sema.ErrNoSlot):
			rep.errorf(stateTimeout, "no free slot: all %d held, and not waiting (--nonblock or --wait 0)", j.max)
			return c.Conflict, 0, false
		case errors.Is(err, sema.ErrTimeout):
			rep.errorf(stateTimeout, "no slot within --wait %v", j.wait)
			return c.Conflict, 0, false
		case waitRanOut:
			rep.errorf(stateTimeout, "no slot within --wait %v, and etcd at %s is unreachable: %v", j.wait, strings.Join(j.conn.Endpoints, ","), err)
			return exitUnavailable, 0, false
		default:
			rep.errorf(stateTimeout, "cannot reach etcd at %s within --dial-timeout %v (set --endpoints, CONCH_ENDPOINTS or endpoints in conch.conf's [etcd]): %v",
				strings.Join(j.conn.Endpoints, ","), j.conn.DialTimeout, err)
			return exitUnavailable, 0, false
		}
	}

	runCtx, stopChild := context.WithCancelCause(ctx)
	defer stopChild(nil)
	context.AfterFunc(h.Context(), func() {
		if cause := context.Cause(h.Context()); !errors.Is(cause, sema.ErrReleased) {
			rep.stopping(cause) // D10: STOPPING=1 as the fence begins
			stopChild(cause)
		}
	})
	heldAt := time.Now()
	res, runErr := plan.run(runCtx, rep, pre.take(), unitrun.Spec{
		Path:       j.path,
		Args:       c.command,
		Env:        childEnv(os.Environ(), j.name, j.max, h.Rev(), int64(h.Lease())),
		Stdin:      stdio.Stdin,
		Stdout:     stdio.Stdout,
		Stderr:     stdio.Stderr,
		KillAfter:  killAfter,
		RuntimeMax: c.RuntimeMax.d,
		Started:    rep.started, // READY=1 (D10)
	}, j.name, j.max, h.Rev())
	lost := h.Context().Err() != nil
	if lost && !res.Started && signalled() == 0 && !errors.Is(runErr, unitrun.ErrNotFound) && !errors.Is(runErr, unitrun.ErrNotExecutable) {
		rep.line(stateWait, false, "slot lost before the command started (%v): queueing again", context.Cause(h.Context()))
		_ = h.Release(context.Background())
		return 0, 0, true
	}
	status, sig = c.outcome(rep, res, runErr, lost, context.Cause(h.Context()), signalled(), heldAt)
	if err := h.Release(context.Background()); err != nil {
		rep.line("", false, "could not release (the key goes at lease expiry, %v): %v", h.TTL(), err)
	}
	return status, sig, false
}

// minTTL is the smallest --ttl that leaves room to fence a child with a
// stop grace of killAfter (D7: deadline - kill-after - 1 s, two keep-alives).
func minTTL(killAfter time.Duration) time.Duration {
	ttl := time.Second // etcd leases are whole seconds
	for sema.FenceTooLate(ttl, killAfter) {
		ttl += time.Second
	}
	return ttl
}

// outcome maps how the child ended to conch's exit (D3).
func (c *semaCmd) outcome(rep *reporter, res unitrun.Result, runErr error, lost bool, lostCause error, sig syscall.Signal, heldAt time.Time) (int, syscall.Signal) {
	switch {
	case runErr != nil && !res.Started:
		rep.errorf(stateReleased, "%v", runErr)
		switch {
		case errors.Is(runErr, unitrun.ErrNotFound):
			return exitNotFound, 0
		case errors.Is(runErr, unitrun.ErrNotExecutable):
			return exitCannotExec, 0
		case sig != 0:
			return 0, sig
		}
		return exitUnavailable, 0 // a scope required and not made (a lost slot re-queued above)
	case sig != 0 && (res.Stopped || res.ScopeStopped || res.Signal != 0):
		// (a child killed by a signal while conch got one was stopped with it, even if
		// systemd's stop of the scope reached it before conch's own stop request did)
		rep.errorf(stateReleased, "%s: stopped the child and released the slot", unix.SignalName(sig))
		return 0, sig
	case lost && res.Stopped:
		rep.errorf(stateLost, "slot lost while the child ran (%v): child stopped", lostCause)
		return exitSlotLost, 0
	case res.RuntimeExceeded:
		limit := fmt.Sprintf("--runtime-max %v", c.RuntimeMax.d)
		if c.RuntimeMax.d == 0 {
			limit = "-p RuntimeMaxSec=" // the scope's limit, set only there
		}
		rep.errorf(stateReleased, "child ran past %s: stopped", limit)
		return exitRuntimeMax, 0
	case runErr != nil:
		rep.errorf(stateReleased, "%v", runErr)
	}
	rep.released(res.ExitStatus, time.Since(heldAt))
	if sig != 0 { // the child ended on its own just as the signal came
		return 0, sig
	}
	if res.ExitStatus < 0 {
		return exitUnavailable, 0
	}
	return res.ExitStatus, 0
}

// signalContext returns a context cancelled, with cause errSignal, by the
// first SIGTERM, SIGINT or SIGHUP that conch's caller did not set to be
// ignored (as nohup does for SIGHUP). Later ones are absorbed: conch is already
// stopping. stop ends the watching goroutine.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 4)
	var sigs []os.Signal
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if !signal.Ignored(sig) { // nohup, or a script's background job: it stays ignored
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) > 0 { // Notify with no signal would catch them all
		signal.Notify(ch, sigs...)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-ch:
			cancel(errSignal{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		wg.Wait()
		// keep absorbing: the signal is re-raised only after Reset in main
		cancel(nil)
	}
}
