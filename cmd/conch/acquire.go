package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"
)

// errSignal is the cancellation cause when conch gets SIGTERM, SIGINT, SIGHUP
// or SIGQUIT: it stops the child, releases, then re-raises (D3, D7, D3c).
type errSignal struct{ sig syscall.Signal }

func (e errSignal) Error() string { return "received " + unix.SignalName(e.sig) }

// Signal is the signal conch got: the run (slotrun.SignalOf) stops the child for it.
func (e errSignal) Signal() syscall.Signal { return e.sig }

// acquire is the main job: wait for a slot, run the command while the slot is safely held,
// release (slotrun.Run), with the watchdog (D10), the signal context (D3) and the child's
// stdio (D5) around it. It returns the error the run ended with (see exitStatus: the child's
// status, or the signal to re-raise, D3).
func (c *semaCmd) acquire(j job) error {
	if err := j.fleet.deadlinePassed(j.run.conflict, time.Now()); err != nil { // before etcd
		return err
	}
	defer systemd.StartWatchdog(c.rep.notify)()
	ctx, stopSignals := signalContext()
	defer stopSignals()
	// the journal relay (childlog.go), closed after the run's guardian: its last lines
	stdio, closeChildLog := childStdio(c.rep, j.command[0])
	defer closeChildLog()
	cfg := j.runConfig(stdio)
	hint := &runNameHint{rep: c.rep, name: j.name, self: cfg.Record} // a typo's "did you mean" (namehint.go)
	defer hint.join()
	cfg.Connect = hint.wrap(cfg.Connect)
	o, err := slotrun.Run(ctx, cfg, &runEvents{rep: c.rep, job: j, childDone: closeChildLog, hint: hint})
	var ns *slotrun.NoSlotError
	switch {
	case errors.As(err, &ns):
		return waitFailed(j, ns)
	case errors.Is(err, slotrun.ErrNoScope): // --scope=always and no scope (D3): 69
		return endf(errUnavailable, "", "%v (--scope=always, -p or --slice)", err)
	case errors.Is(err, slotrun.ErrPeriodUnknown): // no silent double run (D15)
		return endf(errUnavailable, stateReleased, "--once-per: %v", err)
	case err != nil:
		return err // see exitStatus: 69 if etcd did not answer, else 64
	}
	return endOf(o, runtimeLimit(o.Timing)).err
}

// runConfig is j as slotrun runs it, the child's stdin, stdout and stderr those of stdio.
func (j job) runConfig(stdio unitrun.Spec) slotrun.Config {
	wait := time.Duration(0)
	if j.waitSet {
		wait = j.wait
	}
	return slotrun.Config{
		Name: j.name, Max: j.max, Path: j.path, Args: j.command,
		Env:   withConfig(slotrun.DropCredentials(os.Environ(), j.run.keepCreds), j.run.config),
		Stdio: stdio, Plan: j.planOptions(),
		TTL: j.run.ttl, Nonblock: j.run.nonblock, Terse: j.run.quiet, Spread: j.spread, Node: j.node,
		AllowOtherCapacity: j.changeMax,
		Record:             schema.Record{Host: j.hostName(), PID: os.Getpid(), Unit: systemd.OwnUnit()},
		Wait:               wait, Rules: j.fleet.rules(), ConnectTimeout: j.conn.DialTimeout,
		Connect: func(ctx context.Context) (*clientv3.Client, error) { return etcdconn.New(ctx, j.conn) },
	}
}

// planOptions is how j's child runs: --scope, -p and --slice, and --kill-after and
// --runtime-max as given (unitrun decides the effective stop timing from them, D7).
func (j job) planOptions() unitrun.Options {
	opts := j.scope.opts
	opts.KillAfter, opts.RuntimeMax = j.run.killAfter, j.run.runtimeMax
	return opts
}

// waitFailed is the end of a wait that got no slot (ns): the signal conch got,
// 64 when etcd refused us, -E's status (75) when etcd answered and no slot came (sema's
// *WaitError), 69 when etcd did not answer (D3).
func waitFailed(j job, ns *slotrun.NoSlotError) error {
	if sig := ns.Signal; sig != 0 {
		if !ns.Enqueued { // no key of ours was ever written: etcd had not answered yet
			return signalWhileConnecting(sig)
		}
		return signalExit(sig, stateTimeout, "%s while waiting: left the queue", unix.SignalName(sig))
	}
	err := ns.Err
	var we *sema.WaitError
	var ce *sema.CapacityError
	switch {
	case errors.As(err, &ce): // D17
		return capacityRefusal(ce, "not started")
	case errors.Is(err, sema.ErrRefused):
		return endf(errUsage, stateTimeout, "%v (check --user, --password-file and the user's permissions on %s)", err, schema.NamePrefix(j.name))
	case errors.As(err, &we) && !we.Unreachable && j.run.quiet: // -q: the status says it, so cron mails nothing
		return noSlot(j.run.conflict, "")
	case errors.As(err, &we) && !we.Unreachable && we.Paused != nil: // D16
		return noSlot(j.run.conflict, "no slot: %s (not waiting: --nonblock or --wait 0)", who.PauseText(*we.Paused))
	case errors.As(err, &we) && !we.Unreachable && we.NodeBusy:
		return noSlot(j.run.conflict, "no free slot for this node: %s already holds or waits for one, and --spread allows one per node (not waiting: --nonblock or --wait 0)", j.node)
	case errors.As(err, &we) && !we.Unreachable && we.Nonblock:
		return noSlot(j.run.conflict, "no free slot: all %d held%s, and not waiting (--nonblock or --wait 0)", j.max, heldAfterNote(j, we.HeldAfter))
	case errors.As(err, &we) && !we.Unreachable && !j.fleet.deadline.IsZero():
		return noSlot(j.run.conflict, "no slot before --deadline %s%s", j.fleet.deadlineText, heldAfterNote(j, we.HeldAfter))
	case errors.As(err, &we) && !we.Unreachable:
		return noSlot(j.run.conflict, "no slot within --wait %v%s", j.wait, heldAfterNote(j, we.HeldAfter))
	case errors.As(err, &we) && !we.Nonblock:
		return endf(errUnavailable, stateTimeout, "no slot within --wait %v, and %s is unreachable: %v", j.wait, j.conn.Where(), err)
	case etcdconn.IsNotEtcd(err): // it answered at once, in plain HTTP
		return endf(errUnavailable, stateTimeout, "%s answers, but %v", j.conn.Where(), err)
	}
	return endf(errUnavailable, stateTimeout, "no answer from %s within the dial timeout %v (from %s), although it accepts connections (not an etcd, a TLS etcd reached with http://, or a cluster without a leader?): %v",
		j.conn.Where(), j.conn.DialTimeout, j.conn.DialTimeoutFrom, err)
}

// heldAfterNote says which of the slots that refused us are kept after a run (D13e), and how
// to free one sooner, as " (1 kept after a run by node vm until T; conch sema NAME --max N
// --release --node vm frees it)", on the refusal's one line: at most three are named. It
// returns "" for none. Node names come from etcd and are escaped.
func heldAfterNote(j job, held []sema.HeldAfter) string {
	if len(held) == 0 {
		return ""
	}
	var by []string
	for i, h := range held {
		if i == 3 {
			by = append(by, fmt.Sprintf("%d more", len(held)-i))
			break
		}
		s := "node " + who.SafeText(h.Node)
		if !h.Until.IsZero() {
			s += " until " + h.Until.UTC().Format(time.RFC3339)
		}
		by = append(by, s)
	}
	node, what := who.SafeText(held[0].Node), "it"
	if len(held) > 1 {
		node, what = "NODE", "that node's"
	}
	return fmt.Sprintf(" (%d kept after a run by %s; conch sema %s --max %d --release --node %s frees %s)",
		len(held), strings.Join(by, ", "), j.name, j.max, node, what)
}

// signalWhileConnecting is the end of a run that got sig before etcd had answered its
// enqueue: nothing of ours is in etcd, and conch dies of sig (D3).
func signalWhileConnecting(sig syscall.Signal) error {
	return signalExit(sig, stateTimeout, "%s while connecting to etcd: nothing was queued", unix.SignalName(sig))
}

// reporter is the reporter of job j's run (newReporter); with -q it prints only warnings and
// errors on stderr, so a cron job is mailed only when something is wrong.
func (c *semaCmd) reporter(j job) *reporter {
	r := newReporter(c.stderr, c.getenv, c.Verbose, j.name, j.max)
	r.warnOnly = c.Quiet
	return r
}

// signalContext returns a context cancelled, with cause errSignal, by the
// first SIGTERM, SIGINT, SIGHUP or SIGQUIT that conch's caller did not set to
// be ignored (as nohup does for SIGHUP). Later ones are absorbed: conch is
// already stopping. SIGQUIT is a stop request like the others (D3c), not Go's
// goroutine dump and exit 2, which left the slot to its lease's expiry. stop
// ends the watching goroutine.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 4)
	var sigs []os.Signal
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
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

// withConfig returns env with CONCH_CONFIG set to config, the file conch read its connection
// settings from when one was named (D5b): a conch the child runs (`conch sema --held`, a
// nested run) then finds etcd the way this one did, even when --config was given on the
// command line and the default file is not readable. config "" returns env unchanged. env is
// not modified.
func withConfig(env []string, config string) []string {
	if config == "" {
		return env
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CONCH_CONFIG=") {
			out = append(out, kv)
		}
	}
	return append(out, "CONCH_CONFIG="+config)
}

// absPath is path made absolute against the working directory (a child may change it), or
// path itself when it is "" or cannot be made absolute.
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
