package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
	"golang.org/x/sys/unix"
)

// errSignal is the cancellation cause when conch gets SIGTERM, SIGINT or
// SIGHUP: it stops the child, releases, then re-raises (D3, D7).
type errSignal struct{ sig syscall.Signal }

func (e errSignal) Error() string { return "received " + unix.SignalName(e.sig) }

// Signal is the signal conch got: the run (slotrun.SignalOf) stops the child for it.
func (e errSignal) Signal() syscall.Signal { return e.sig }

// acquire is the main job: wait for a slot, run the command while the slot
// is safely held, release. It returns the error the run ended with (see
// exitStatus: the child's status, or the signal to re-raise, D3).
func (c *semaCmd) acquire(j job) error {
	if err := j.fleet.deadlinePassed(j.run.conflict, time.Now()); err != nil { // before etcd
		return err
	}
	r, err := newSemaRun(j, c.rep)
	defer r.close()
	if err != nil {
		return err
	}
	for {
		again, err := r.holdOnce()
		if !again {
			return err
		}
		// the slot was lost before the command could start: the command
		// never ran, so queue again while --wait allows (04_sema.md
		// "Failure behavior"), with a fresh guardian
		r.pre.reset()
	}
}

// holdOnce acquires a slot and runs the command in it. again is true when
// the slot was lost before the command started, so the caller re-enters.
func (r *semaRun) holdOnce() (again bool, err error) {
	h, err := r.sem.Acquire(r.waitCtx)
	if err != nil {
		return false, r.waitFailed(err)
	}
	plan, err := r.planning.wait(r.rep, true)
	if err != nil { // --scope=always and no scope (D3): the child never starts
		_ = h.Release(context.Background())
		return false, err
	}
	// one context, one cause: a signal to conch (errSignal) or the slot's loss (D7)
	runCtx, unbind := h.Bind(r.sigCtx)
	defer unbind()
	stopNotify := context.AfterFunc(runCtx, func() {
		if cause := context.Cause(runCtx); slotrun.SlotLost(cause) {
			r.rep.stopping(cause) // D10: STOPPING=1 as the fence begins
		}
	})
	defer stopNotify()
	if skip, err := r.onceSkip(h); skip { // --once-per (D15): this period's run is done
		_ = h.Release(context.Background())
		return false, err
	}
	heldAt := time.Now()
	terminal := slotrun.OwnsTerminal(r.stdio.Stdin) // then the child gets it (D5)
	// D7b: no grace once the lease's deadline has passed
	stopCtx, unstop := slotrun.NoGraceWhenLate(runCtx)
	defer unstop()
	// a line when the stop moves to SIGKILL (escalation.go)
	stopWatch := r.watchEscalation(runCtx, heldAt)
	res, runErr := plan.run(stopCtx, r.rep, r.pre.take(), r.childSpec(h.Rev(), int64(h.Lease())), r.scopeID(h.Rev()))
	stopWatch()
	v := endOf(slotrun.Decide(slotrun.Holding{Result: res, RunErr: runErr, Cause: context.Cause(runCtx), Terminal: terminal}),
		r.job.scope.runtimeLimit(r.job.run.runtimeMax))
	if v.requeue {
		r.rep.line(stateWait, false, "slot lost before the command started (%v): queueing again", context.Cause(runCtx))
		_ = h.Release(context.Background())
		return true, nil
	}
	r.markOnce(h, v, res, heldAt)                   // --once-per (D15): a successful run closes the period
	if r.keepAfter(h, res, context.Cause(runCtx)) { // --hold-after (D13): kept, or released saying why
		return false, v.err
	}
	if v.ran {
		r.rep.released(res.ExitStatus, time.Since(heldAt))
	}
	if err := h.Release(context.Background()); err != nil {
		r.rep.line("", false, "could not release (the key goes at lease expiry, %v): %v", h.TTL(), err)
	}
	return false, v.err
}

// scopeID names the scope of the holding of the key created at rev (D8).
func (r *semaRun) scopeID(rev int64) scopeID { return scopeID{r.job.name, r.job.max, rev} }

// preloadSpec is the spec the run's plan will give unitrun for the key created at rev with
// lease, once it holds (childSpec, scoped as the plan says): what the prestarter preloads.
func (r *semaRun) preloadSpec(rev, lease int64) unitrun.Spec {
	plan, err := r.planning.wait(r.rep, false)
	if err != nil {
		return r.childSpec(rev, lease) // the run ends at the slot (holdOnce)
	}
	return plan.scoped(r.childSpec(rev, lease), r.scopeID(rev))
}

// childSpec is what unitrun runs while the key created at rev, bound to lease, holds the slot.
func (r *semaRun) childSpec(rev, lease int64) unitrun.Spec {
	return unitrun.Spec{
		Path:       r.job.path,
		Args:       r.job.command,
		Env:        slotrun.ChildEnv(slotrun.DropCredentials(os.Environ(), r.job.run.keepCreds), r.job.name, r.job.max, rev, lease),
		Stdin:      r.stdio.Stdin,
		Stdout:     r.stdio.Stdout,
		Stderr:     r.stdio.Stderr,
		KillAfter:  r.job.run.killAfterGiven, // unitrun decides the grace (D7)
		RuntimeMax: r.job.run.runtimeMax,
		Deadline:   r.deadline,    // D7b
		Started:    r.rep.started, // READY=1 (D10)
		Warn:       func(msg string) { r.rep.warnf("%s", msg) },
	}
}

// waitFailed is the end of a wait that got no slot (err from Acquire): the signal conch got,
// 64 when etcd refused us, -E's status (75) when etcd answered and no slot came (sema's
// *WaitError), 69 when etcd did not answer (D3).
func (r *semaRun) waitFailed(err error) error {
	if sig := slotrun.SignalOf(context.Cause(r.waitCtx)); sig != 0 {
		if !r.enqueued.Load() { // no key of ours was ever written: etcd had not answered yet
			return signalWhileConnecting(sig)
		}
		return signalExit(sig, stateTimeout, "%s while waiting: left the queue", unix.SignalName(sig))
	}
	j := r.job
	var we *sema.WaitError
	switch {
	case errors.Is(err, sema.ErrRefused):
		return endf(errUsage, stateTimeout, "%v (check --user, --password-file and the user's permissions on %s)", err, sema.NamePrefix(j.name))
	case errors.As(err, &we) && !we.Unreachable && j.run.quiet: // -q: the status says it, so cron mails nothing
		return noSlot(j.run.conflict, "")
	case errors.As(err, &we) && !we.Unreachable && we.Paused != nil: // D16
		return noSlot(j.run.conflict, "no slot: %s (not waiting: --nonblock or --wait 0)", pauseText(*we.Paused))
	case errors.As(err, &we) && !we.Unreachable && we.NodeBusy:
		return noSlot(j.run.conflict, "no free slot for this node: %s already holds or waits for one, and --spread allows one per node (not waiting: --nonblock or --wait 0)", j.node)
	case errors.As(err, &we) && !we.Unreachable && we.Nonblock:
		return noSlot(j.run.conflict, "no free slot: all %d held, and not waiting (--nonblock or --wait 0)", j.max)
	case errors.As(err, &we) && !we.Unreachable && !j.fleet.deadline.IsZero():
		return noSlot(j.run.conflict, "no slot before --deadline %s", j.fleet.deadline.Format(time.RFC3339))
	case errors.As(err, &we) && !we.Unreachable:
		return noSlot(j.run.conflict, "no slot within --wait %v", j.wait)
	case errors.As(err, &we) && !we.Nonblock:
		return endf(errUnavailable, stateTimeout, "no slot within --wait %v, and %s is unreachable: %v", j.wait, j.conn.Where(), err)
	case etcdconn.IsNotEtcd(err): // it answered at once, in plain HTTP
		return endf(errUnavailable, stateTimeout, "%s answers, but %v", j.conn.Where(), err)
	}
	return endf(errUnavailable, stateTimeout, "no answer from %s within the dial timeout %v (from %s), although it accepts connections (not an etcd, a TLS etcd reached with http://, or a cluster without a leader?): %v",
		j.conn.Where(), j.conn.DialTimeout, j.conn.DialTimeoutFrom, err)
}

// signalWhileConnecting is the end of a run that got sig before etcd had answered its
// enqueue: nothing of ours is in etcd, and conch dies of sig (D3).
func signalWhileConnecting(sig syscall.Signal) error {
	return signalExit(sig, stateTimeout, "%s while connecting to etcd: nothing was queued", unix.SignalName(sig))
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
