package unitrun

// This file runs in the caller's process (conch): the run plan, built once: how commands stop
// (D7) and whether they run in a scope (D8, decided beside the caller's own start-up, D8b),
// and running them as planned, falling back to direct mode where that is allowed.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/conch-project/conch/internal/systemd"
)

// dialTimeout bounds finding systemd and its manager when a Plan is decided (D8). It is spent
// only on hosts where systemd is the init system.
const dialTimeout = 5 * time.Second

// serviceStopWait bounds how long Plan.Run waits for its context to end after systemd stopped
// the command's scope on its own while the caller runs in a service (awaitServiceStop).
const serviceStopWait = 2 * time.Second

// ScopeMode says whether a Plan runs commands in a transient scope (D8).
type ScopeMode int

const (
	// ScopeAuto: in a scope when systemd is the init system and its manager answers, else
	// directly; a scope that cannot be created after all is replaced by direct mode too.
	ScopeAuto ScopeMode = iota
	// ScopeAlways: in a scope or not at all.
	ScopeAlways
	// ScopeNever: always directly, without touching systemd.
	ScopeNever
)

// Options is what the caller asks of how its commands run: where (D8) and how they stop (D7).
// StartPlan decides the rest once.
type Options struct {
	Mode ScopeMode
	// Properties are the scope's properties (systemd.ParseProperties), set last on it; a
	// KillSignal, TimeoutStopSec or RuntimeMaxSec among them also sets the stop timing
	// (Plan.Timing), which a command run directly after all (ScopeAuto's fallback) keeps.
	Properties []sdbus.Property
	// Slice is the scope's slice (systemd.SliceName): "" means the caller's service's slice.
	Slice string
	// KillAfter is the grace between the stop signal and SIGKILL as the caller gives it;
	// DefaultKillAfter if <= 0. A scope's TimeoutStopSec among Properties wins.
	KillAfter time.Duration
	// RuntimeMax stops a command once it has run that long (D7); 0 means unlimited. A
	// RuntimeMaxSec among Properties wins.
	RuntimeMax time.Duration
}

// ScopeUnit names the scope of one command (Plan.Run, Prestarter.Run).
type ScopeUnit struct {
	Name        string // the unit name, e.g. systemd.ScopeName
	Description string // shown by systemctl status
	// Started, if set, replaces Spec.Started when the command starts in this scope (not when
	// it runs directly after all), so the caller learns that the scope holds it.
	Started func(pid int)
}

// Plan is how the caller's commands run, built once by StartPlan: their stop timing (Timing),
// and whether they run in transient scopes through one manager connection or directly (D8).
// A caller that starts nothing ahead runs each command with Run; one that starts the guardian
// ahead, while it waits for its slot, uses Prestart. Close releases it.
type Plan struct {
	opts   Options
	timing StopTiming    // effectiveTiming of opts: the one place it is decided (D7)
	done   chan struct{} // closed when conn, service, fallback and err are set
	primed chan struct{} // closed when systemd.PrimeMove returned; nil when it was not called

	conn     *sdbus.Conn           // nil: direct mode
	service  systemd.CallerService // the service the caller runs in, read before any slot
	fallback error                 // why ScopeAuto runs directly, nil otherwise
	err      error                 // why ScopeAlways has no scope, nil otherwise
}

// StartPlan builds the plan for opts and returns at once. The stop timing is decided now
// (Timing). Where commands run is decided as follows (D8): directly with ScopeNever; otherwise
// in scopes when systemd is the init system, its manager answers within 5 s (and before ctx
// ends) and, when the caller runs in a service, that service's slice and limits can be read
// (systemd.FindCallerService: read now, not between a slot and the command). Else ScopeAuto
// runs directly and Wait says why (its fallback), and ScopeAlways has that reason as Wait's error
// (wrapping systemd.ErrNoSystemd, systemd.ErrBusUnavailable, the service's read error or
// ctx's cause).
//
// Where systemd runs and opts allows a scope, that decision is made on a goroutine of its
// own, so that its D-Bus round trips (several milliseconds) overlap the caller's own start-up
// (D8b), and a second goroutine readies the kernel for the scope's cgroup move
// (systemd.PrimeMove, D8d; it ends once the kernel has moved the caller where it already is,
// milliseconds). Without systemd, or with ScopeNever, it is decided before StartPlan returns,
// so that ScopeAlways fails before the caller has done anything. Close joins both goroutines
// and must be called.
func StartPlan(ctx context.Context, opts Options) *Plan {
	p := &Plan{opts: opts, timing: effectiveTiming(opts), done: make(chan struct{})}
	if opts.Mode == ScopeNever || !systemd.Booted() {
		p.decide(ctx)
		close(p.done)
		return p
	}
	p.primed = make(chan struct{})
	go func() {
		defer close(p.primed)
		_ = systemd.PrimeMove() // only saves time: an error leaves the move to pay its own wait
	}()
	go func() {
		defer close(p.done)
		p.decide(ctx)
	}()
	return p
}

// decide decides where commands run (StartPlan), blocking for at most dialTimeout.
func (p *Plan) decide(ctx context.Context) {
	if p.opts.Mode == ScopeNever {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := systemd.Dial(ctx)
	if err == nil {
		if p.service, err = systemd.FindCallerService(ctx, conn); err != nil {
			conn.Close()
		}
	}
	switch {
	case err == nil:
		p.conn = conn
	case p.opts.Mode == ScopeAlways:
		p.err = err
	default:
		p.fallback = err
	}
}

// Timing returns the plan's stop timing: the stop signal, grace and runtime limit its
// commands get, and where each came from (D7), for the caller's own deadlines (its fence must
// cover the grace) and messages. It does not block.
func (p *Plan) Timing() StopTiming { return p.timing }

// Intent reports, without waiting, whether commands are meant to run in a scope: as decided
// once decided, else true (it is decided on a goroutine only where systemd runs and the mode
// allows a scope).
func (p *Plan) Intent() bool {
	select {
	case <-p.done:
		return p.inScope()
	default:
		return true
	}
}

// Decided reports whether where commands run is decided already, so that Wait does not block.
func (p *Plan) Decided() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait blocks until where commands run is decided and returns why a ScopeAuto plan runs
// them directly (fallback; nil when they run in scopes, or were never meant to), and err, the
// error of ScopeAlways without a scope (see StartPlan): no command can run then. It may be
// called any number of times, from any goroutine.
func (p *Plan) Wait() (fallback, err error) {
	<-p.done
	return p.fallback, p.err
}

// inScope reports whether commands are meant to run in a scope (decided).
func (p *Plan) inScope() bool { return p.err == nil && p.conn != nil }

// Close waits for the decision and for PrimeMove's goroutine, and closes the manager
// connection, if any. Call it after every Run has returned and every Prestarter made by
// Prestart is closed (a scope prepared ahead is stopped through the connection).
func (p *Plan) Close() {
	<-p.done
	if p.primed != nil {
		<-p.primed
	}
	if p.conn != nil {
		p.conn.Close()
	}
}

// scoped returns spec with the plan's stop timing, to run in scope unit (scopeSpec from the
// plan's options and service) or directly, as decided (it waits for the decision): what the
// package's run, or preload ahead of the slot, is given.
func (p *Plan) scoped(spec Spec, unit ScopeUnit) Spec {
	<-p.done
	if p.conn == nil {
		return p.direct(spec)
	}
	spec.stop = p.timing
	if unit.Started != nil {
		spec.Started = unit.Started
	}
	spec.scope = &scopeSpec{Conn: p.conn, Name: unit.Name, Description: unit.Description,
		Slice: p.opts.Slice, Properties: p.opts.Properties, Service: p.service}
	return spec
}

// Run starts the command described by spec as the Plan says, in scope unit or directly,
// through a guardian started now (D7), blocks until the command AND everything it left
// running have ended, and returns how the command ended: the way in for a caller that starts
// nothing ahead (a caller that starts the guardian while it waits uses Prestart). The stop
// signal, KillAfter and RuntimeMax below are the Plan's Timing.
//
// The guardian is the guardian program beside this one when it is of the same build, else
// this program re-executed (Spec.Guardian, D7a; cmd/conch must dispatch GuardianArg to
// GuardianMain). It is the command's parent and a child subreaper, and it gets SIGTERM when
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
// the command was still running) and a nil error: why ctx ended is the caller's to know. A
// cause of ctx that wraps ErrNoGrace makes that stop SIGKILL at once, with no grace (D7b), even
// when a stop with the grace was under way.
// RuntimeMax, counted from the start, stops the command the same way and sets
// Result.RuntimeExceeded.
//
// When stdin is a terminal and the caller's process group is its foreground group, the
// command's group gets the terminal while it runs (a command reading the terminal works and
// Ctrl-C reaches only the command) and the caller's group gets it back before Run returns (D5).
//
// Errors: a command that cannot be executed gives Result.Started false and an error wrapping
// ErrNotFound or ErrNotExecutable (no exit status: the caller chooses it). A BeforeStart error is returned wrapped, the
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
// Scope mode (D8): once the guardian is ready, Run creates the transient scope unit with the
// guardian in it (with the Options' Slice and Properties; in the caller's service's slice,
// bound to that service and with its limits when the caller runs in one) and only then lets it start the command, so
// the command is in the scope from its first instruction. Stopping (ctx, RuntimeMax) is
// StopScope: systemd sends the scope's KillSignal to every process in it and SIGKILL after
// TimeoutStopSec (KillAfter); the guardian survives the stop signal to report the command's
// status, and stops the scope itself if the caller dies (D7). Run returns once the scope is
// gone, or, after the command exited on its own, once the guardian saw its whole tree end
// (systemd then collects the empty scope by itself). A scope that cannot be created gives an
// error wrapping ErrScopeFailed with Result.Started false: ScopeAlways returns it, ScopeAuto
// passes it to warn (if set) and runs spec directly (D8); when ctx ends meanwhile, the error
// wraps its cause instead. Run redials a manager connection that was lost since StartPlan.
// Without a scope for ScopeAlways, Run returns Wait's error, the command not started. When systemd
// stops the scope on its own (the caller's service stopping, an operator), the result is the
// command's status, with neither Stopped nor RuntimeExceeded set unless RuntimeMax had passed;
// when the caller runs in a service, Run then waits up to serviceStopWait for ctx to end
// (awaitServiceStop) before it returns.
//
// Run starts two goroutines per call, the guardian's locked forking thread (it waits for the
// guardian) and the status-pipe reader, and in scope mode one more for StopScope; all have
// ended when Run returns. Calls must not overlap: a Plan is not safe for concurrent use, but
// for Timing, Intent, Decided and Wait.
func (p *Plan) Run(ctx context.Context, spec Spec, unit ScopeUnit, warn func(error)) (Result, error) {
	return p.run(ctx, nil, spec, unit, warn)
}

// direct returns spec with the plan's stop timing, to run with no scope.
func (p *Plan) direct(spec Spec) Spec {
	spec.stop, spec.scope = p.timing, nil
	return spec
}

// run is Run with the prepared guardian g (nil: run starts one), which the caller closes.
func (p *Plan) run(ctx context.Context, g *prepared, spec Spec, unit ScopeUnit, warn func(error)) (Result, error) {
	if _, err := p.Wait(); err != nil {
		return Result{}, err
	}
	direct := p.direct(spec)
	if p.conn == nil {
		return runWith(ctx, g, direct)
	}
	if !p.conn.Connected() { // the bus went away while the caller waited
		if err := p.redial(); err != nil {
			err = fmt.Errorf("%s: not started: %w: %w", spec.Path, ErrScopeFailed, err)
			return p.orDirect(ctx, g, direct, err, warn)
		}
	}
	res, err := runWith(ctx, g, p.scoped(spec, unit))
	if res.ScopeStopped && strings.HasSuffix(systemd.OwnUnit(), ".service") {
		awaitServiceStop(ctx)
	}
	if res.Started || !errors.Is(err, ErrScopeFailed) {
		return res, err
	}
	return p.orDirect(ctx, nil, direct, err, warn) // g is used up: a fresh guardian
}

// orDirect handles a scope that could not be created: ScopeAlways returns err, ScopeAuto
// tells warn and runs spec directly, with g if it is still unused.
func (p *Plan) orDirect(ctx context.Context, g *prepared, spec Spec, err error, warn func(error)) (Result, error) {
	if p.opts.Mode == ScopeAlways {
		return Result{}, err
	}
	if warn != nil {
		warn(err)
	}
	return runWith(ctx, g, spec)
}

// redial replaces a connection the bus dropped.
func (p *Plan) redial() error {
	p.conn.Close()
	p.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	conn, err := systemd.Dial(ctx)
	if err != nil {
		return err
	}
	p.conn = conn
	return nil
}

// runWith runs spec with the prepared guardian g, or with a guardian of its own when g is nil.
func runWith(ctx context.Context, g *prepared, spec Spec) (Result, error) {
	if g == nil {
		return run(ctx, spec)
	}
	return g.run(ctx, spec)
}

// awaitServiceStop waits up to serviceStopWait for ctx to end. The scope is bound to the
// caller's service (BindsTo=, D8), so `systemctl stop` of the service stops the scope and
// signals the caller at about the same time, and the command can be seen gone before the
// caller's own signal arrives: waiting for it lets the caller end as a stopped service should
// (D3) rather than with the command's 128+n. An operator's stop of the scope alone costs this
// wait.
func awaitServiceStop(ctx context.Context) {
	t := time.NewTimer(serviceStopWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// String names the mode as systemd-run's users would: "auto", "always" or "never".
func (m ScopeMode) String() string {
	switch m {
	case ScopeAlways:
		return "always"
	case ScopeNever:
		return "never"
	}
	return "auto"
}
