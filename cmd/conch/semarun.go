package main

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// semaRun is one `conch sema <name> --max N -- <cmd...>` run: its parts are set once, by
// newSemaRun and connect, and closed once, by close, in the reverse order of their making.
type semaRun struct {
	job      job
	rep      *reporter
	stdio    unitrun.Spec // conch's own stdin, stdout and stderr, or the journal relay (childStdio), handed to the child
	pre      *prestarter  // the guardian started ahead (D7); owned by this run, reset for re-entry
	planning *planning    // where the child runs (D8), decided beside the etcd round trips (D8b)
	sem      *sema.Semaphore
	sigCtx   context.Context // cancelled with errSignal by SIGTERM, SIGINT or SIGHUP (D3)
	waitCtx  context.Context // sigCtx bounded by --wait
	// enqueued: etcd answered our enqueue (sema.EventEnqueued), so a key of ours was written
	enqueued atomic.Bool
	closers  []func()

	deadline *unitrun.Deadline // the held lease's deadline, for the guardian's own fence (D7b)
}

// reporter is the reporter of job j's run (newReporter); with -q it prints only warnings and
// errors on stderr, so a cron job is mailed only when something is wrong.
func (c *semaCmd) reporter(j job) *reporter {
	r := newReporter(c.stderr, c.getenv, c.Verbose, j.name, j.max)
	r.warnOnly = c.Quiet
	return r
}

// newSemaRun starts what job j's run needs before etcd, reporting through rep: the watchdog,
// the signal context, the scope plan (D8, D8b: decided beside the etcd round trips where
// systemd runs) and the prestarted guardian, then connect. It returns the run, to be closed
// even when err is not nil, and the error that ends the run.
func newSemaRun(j job, rep *reporter) (*semaRun, error) {
	r := &semaRun{job: j, rep: rep, deadline: unitrun.NewDeadline()}
	r.closers = append(r.closers, startWatchdog(r.rep.notify))
	ctx, stopSignals := signalContext()
	r.sigCtx = ctx
	r.closers = append(r.closers, stopSignals)
	// The scope plan first: without systemd it is decided now (D8: --scope=always exits 69
	// before any etcd call), else on a goroutine of its own (D8b). Its bus connection is
	// closed after the guardian, whose prepared scope is stopped through it (D8b).
	r.planning = startPlanning(j.scope)
	r.closers = append(r.closers, r.planning.close)
	if r.planning.decided() {
		if _, err := r.planning.wait(r.rep, true); err != nil {
			return r, err
		}
	}
	// The guardian starts now, so that its start-up overlaps the D-Bus and etcd round trips;
	// it is closed while we wait behind others (D7). It is closed after the release: the
	// guardian's exit is not waited for first.
	var closeChildLog func()
	r.stdio, closeChildLog = childStdio(r.rep, j.command[0]) // D5; the journal relay (childlog.go)
	r.closers = append(r.closers, closeChildLog)             // after the guardian: its last lines
	r.pre = startPrestarter(r.stdio)
	r.closers = append(r.closers, r.pre.close)
	if err := r.connect(); err != nil {
		return r, err
	}
	r.pre.preloadWith(r.preloadSpec) // the key's spec, sent ahead of the slot: off the hand-off's path
	return r, nil
}

// connect makes the etcd client and the semaphore, and warns when the child's stop grace
// does not fit in the lease etcd grants (D7; ttlwarn.go).
func (r *semaRun) connect() error {
	client, err := etcdconn.New(r.sigCtx, r.job.conn)
	if sig := slotrun.SignalOf(context.Cause(r.sigCtx)); sig != 0 { // D3: a signal while connecting
		if client != nil {
			client.Close()
		}
		return signalWhileConnecting(sig)
	}
	if err != nil {
		return err // see exitStatus: 69 if etcd did not answer, else 64
	}
	r.closers = append(r.closers, func() { client.Close() })
	v := r.job.run
	// the short-TTL warning, on the TTL etcd grants (ttlwarn.go)
	checkLease := r.leaseCheck(v.killAfter)
	host := r.job.node // the node's name (D11), or the kernel hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	r.sem, err = sema.New(client, r.job.name, r.job.max, sema.Options{
		Spread:         r.job.spread,
		Node:           r.job.node,
		TTL:            v.ttl,
		ConnectTimeout: r.job.conn.DialTimeout,
		FenceMargin:    v.killAfter + time.Second, // D7
		OnRenew:        r.deadline.Set,            // D7b
		Nonblock:       v.nonblock,
		Record:         sema.Record{Host: host, PID: os.Getpid(), Unit: ownUnit(), Scope: r.planning.intent()},
		OnEvent:        func(e sema.Event) { checkLease(e); r.onEvent(e) },
	})
	if err != nil {
		return err // a name or capacity sema refuses: 64 (exitStatus)
	}
	r.waitCtx = r.sigCtx
	if r.job.waitSet && r.job.wait > 0 {
		var cancel context.CancelFunc
		r.waitCtx, cancel = context.WithTimeout(r.sigCtx, r.job.wait)
		r.closers = append(r.closers, cancel)
	}
	if d := r.job.fleet.deadline; !d.IsZero() { // --deadline: an absolute bound on the wait
		var cancel context.CancelFunc
		r.waitCtx, cancel = context.WithDeadline(r.sigCtx, d)
		r.closers = append(r.closers, cancel)
	}
	return nil
}

// onEvent is sema's report of the run's progress: the run notes that etcd answered its
// enqueue, then hands the event to the reporter and the prestarter.
func (r *semaRun) onEvent(e sema.Event) {
	if e.Kind == sema.Enqueued || e.Kind == sema.Held {
		r.enqueued.Store(true)
	}
	r.rep.onEvent(e)
	r.pre.onEvent(e)
}

// close closes the run's parts, the last made first.
func (r *semaRun) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}
