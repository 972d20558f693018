package slotrun

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is one run's values, validated by the caller: nothing here is checked again.
type Config struct {
	Name string // the semaphore's name and capacity (sema.New)
	Max  int
	Path string   // the command, resolved (unitrun.Spec.Path)
	Args []string // its argv
	// Env is the child's environment before ChildEnv sets the slot's variables (credentials
	// already dropped as the caller wants, DropCredentials)
	Env   []string
	Stdio unitrun.Spec // the child's Stdin, Stdout and Stderr
	// Plan is where the child runs and how it stops, as given (KillAfter 0 when unset):
	// unitrun decides the effective stop timing from it (D7, D8)
	Plan               unitrun.Options
	TTL                time.Duration // the lease's TTL asked for (D4)
	Nonblock           bool          // never wait behind others
	Terse              bool          // the caller words no refusal (sema.Options.Terse)
	AllowOtherCapacity bool          // run beside keys of another capacity (sema.Options.AllowOtherCapacity, D17)
	Spread             bool          // one slot per node (D11), named Node
	Node               string
	Record             schema.Record  // the holder record's Host and Unit; Scope is set by the run (D6)
	Wait               time.Duration  // the wait's bound, 0 for none; Rules.Deadline bounds it too
	Rules              fleet.RunRules // hold after the run (D13), once per period (D15), the window
	ConnectTimeout     time.Duration  // sema.Options.ConnectTimeout
	// Connect makes the etcd client under ctx; the run closes it when it ends
	Connect func(ctx context.Context) (*clientv3.Client, error)
}

// run is one run of Config: its parts are set once, by start and connect, and closed once,
// by close, in the reverse order of their making.
type run struct {
	cfg      Config
	rep      Reporter
	pre      *unitrun.Prestarter // the guardian started ahead (D7); reset for re-entry
	planning *planning           // how the child runs (D7, D8), decided beside the etcd round trips (D8b)
	sem      *sema.Semaphore
	client   *clientv3.Client // the semaphore's, for the period's marker (D15)
	sigCtx   context.Context  // the caller's context: its cause with a signal stops the run (D3)
	waitCtx  context.Context  // sigCtx bounded by the wait
	// enqueued: etcd answered our enqueue (sema.Enqueued, or Waiting with NodeBusy), so a key
	// of ours was written (with NodeBusy, the node-wait marker)
	enqueued atomic.Bool
	// cluster: the etcd cluster ID of the last queue event that named one (D18), for the
	// preloaded spec's CONCH_CLUSTER_ID
	cluster  atomic.Uint64
	closers  []func()
	deadline *unitrun.Deadline // the held lease's deadline, for the guardian's own fence (D7b)
}

// Run waits for a slot of cfg's semaphore under ctx, runs the command in it while the slot is
// safely held (D7), keeps or releases the slot (D13), and returns how the run ended, telling
// rep what happens on the way. ctx is cancelled, with a cause that carries a signal
// (SignalOf), when the process must stop (D3). A slot lost before the command started queues
// again. The error is nil with an Outcome; else a *NoSlotError (no slot: etcd's answer, the
// wait's end or the signal), ErrNoScope (a scope required and not made: nothing was
// written, or the slot is released), ErrPeriodUnknown (the period's marker unreadable: the
// child did not start, D15), or Connect's or sema.New's error unchanged.
func Run(ctx context.Context, cfg Config, rep Reporter) (Outcome, error) {
	r := &run{cfg: cfg, rep: rep, sigCtx: ctx, deadline: unitrun.NewDeadline()}
	defer r.close()
	if err := r.start(); err != nil {
		return Outcome{}, err
	}
	for {
		o, again, err := r.holdOnce()
		if !again {
			o.Timing = r.timing() // reported back, for messages (D7)
			return o, err
		}
		// the slot was lost before the command could start: the command never ran, so queue
		// again while the wait allows (04_sema.md "Failure behavior"), with a fresh guardian
		r.pre.Reset()
	}
}

// start starts what the run needs before etcd: the run plan (its stop timing, D7; its scope,
// D8, D8b: decided beside the etcd round trips where systemd runs) and the prestarted guardian,
// then connect. It returns the error that ends the run.
func (r *run) start() error {
	// The plan first: without systemd it is decided now (D8: a required scope ends the run
	// before any etcd call), else on a goroutine of its own (D8b). Its bus connection is
	// closed after the guardian, whose prepared scope is stopped through it (D8b).
	// A signal does not cut the decision short: it ends the run where the run looks for it
	// (D3), whatever the plan says, so a required scope is never reported missing for it.
	r.planning = startPlanning(context.WithoutCancel(r.sigCtx), r.cfg.Plan)
	r.closers = append(r.closers, r.planning.close)
	if r.planning.Decided() {
		if err := r.planning.wait(r.rep); err != nil {
			return err
		}
	}
	// The guardian starts now, so that its start-up overlaps the D-Bus and etcd round trips;
	// it is closed while we wait behind others (D7).
	r.pre = r.planning.Prestart(r.cfg.Stdio)
	r.closers = append(r.closers, r.pre.Close)
	if err := r.connect(); err != nil {
		return err
	}
	r.pre.PreloadWith(r.preloadSpec) // the key's spec, sent ahead of the slot: off the hand-off's path
	return nil
}

// connect makes the etcd client and the semaphore, and bounds the wait.
func (r *run) connect() error {
	client, err := r.cfg.Connect(r.sigCtx)
	if sig := SignalOf(context.Cause(r.sigCtx)); sig != 0 { // D3: a signal while connecting
		if client != nil {
			client.Close()
		}
		return &NoSlotError{Err: context.Cause(r.sigCtx), Signal: sig}
	}
	if err != nil {
		return err
	}
	r.closers = append(r.closers, func() { client.Close() })
	r.client = client
	checkLease := r.leaseCheck()
	rec := r.cfg.Record
	rec.Scope = r.planning.Intent()
	r.sem, err = sema.New(client, r.cfg.Name, r.cfg.Max, sema.Options{
		Spread:             r.cfg.Spread,
		Node:               r.cfg.Node,
		TTL:                r.cfg.TTL,
		ConnectTimeout:     r.cfg.ConnectTimeout,
		FenceMargin:        r.timing().KillAfter + time.Second, // D7
		OnRenew:            r.deadline.Set,                     // D7b
		Nonblock:           r.cfg.Nonblock,
		Terse:              r.cfg.Terse,
		AllowOtherCapacity: r.cfg.AllowOtherCapacity,
		Record:             rec,
		OnEvent:            func(e sema.Event) { checkLease(e); r.onEvent(e) },
	})
	if err != nil {
		return err // a name or capacity sema refuses
	}
	r.waitCtx = r.sigCtx
	if r.cfg.Wait > 0 {
		var cancel context.CancelFunc
		r.waitCtx, cancel = context.WithTimeout(r.sigCtx, r.cfg.Wait)
		r.closers = append(r.closers, cancel)
	}
	if d := r.cfg.Rules.Deadline; !d.IsZero() { // the window: an absolute bound on the wait
		var cancel context.CancelFunc
		r.waitCtx, cancel = context.WithDeadline(r.waitCtx, d) // within Wait's bound too
		r.closers = append(r.closers, cancel)
	}
	return nil
}

// onEvent is sema's report of the run's progress: the run notes that etcd answered its
// enqueue, then hands the event to the reporter and the prestarter.
func (r *run) onEvent(e sema.Event) {
	if e.Kind == sema.Enqueued || e.Kind == sema.Held || e.Kind == sema.Waiting && e.NodeBusy {
		r.enqueued.Store(true) // with NodeBusy (D11): no key in the queue, but a node-wait marker
	}
	if e.Cluster != 0 {
		r.cluster.Store(e.Cluster)
	}
	r.rep.Event(e)
	prestartOn(r.pre, e)
}

// close closes the run's parts, the last made first.
func (r *run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// timing is how the child will be stopped and limited, as the run's plan decided it (D7).
func (r *run) timing() unitrun.StopTiming { return r.planning.Timing() }
