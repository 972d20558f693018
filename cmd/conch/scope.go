package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/unitrun"
)

// scopeDialTimeout bounds finding systemd and its bus for --scope=auto|always (D8). It is
// spent before any etcd call, and only on hosts where /run/systemd/system exists.
const scopeDialTimeout = 5 * time.Second

// --scope modes (D8).
const (
	scopeAuto   = "auto"
	scopeAlways = "always"
	scopeNever  = "never"
)

// scopeFlags are --scope, -p and --slice, checked before any etcd call (D8).
type scopeFlags struct {
	mode  string // scopeAuto, scopeAlways or scopeNever; -p or --slice make it scopeAlways
	props []sdbus.Property
	slice string
}

// parseScopeFlags checks --scope, -p and --slice (D8): every -p against unitrun's table of
// scope-legal properties with typed values, --slice as a slice name. A usage error (64) for
// anything refused, or for -p/--slice with --scope=never.
func parseScopeFlags(mode string, props []string, slice string) (scopeFlags, error) {
	f := scopeFlags{mode: mode}
	if f.mode == "" {
		f.mode = scopeAuto
	}
	if len(props) > 0 || slice != "" {
		if f.mode == scopeNever {
			return f, usagef("-p/--property and --slice need a scope: they cannot go with --scope=never")
		}
		f.mode = scopeAlways
	}
	parsed, err := systemd.ParseProperties(props)
	if err != nil {
		return f, usagef("-p: %v", err)
	}
	f.props = parsed
	if slice != "" {
		if f.slice, err = systemd.SliceName(slice); err != nil {
			return f, usagef("%v", err)
		}
	}
	return f, nil
}

// timing returns how the child will be stopped and limited and where each value came from
// (unitrun.EffectiveTiming): -p KillSignal=, TimeoutStopSec= and RuntimeMaxSec= when given
// (unitrun takes them as the scope's and the guardian's), else killAfter (--kill-after) and
// runtimeMax (--runtime-max), else unitrun's defaults. The fence margin of D7 must cover its
// KillAfter.
func (f scopeFlags) timing(killAfter, runtimeMax time.Duration) unitrun.StopTiming {
	return unitrun.EffectiveTiming(unitrun.Spec{KillAfter: killAfter, RuntimeMax: runtimeMax}, f.props)
}

// runtimeLimit names the run-time limit that stops the child, for the line of exit 124, as
// the user gave it (unitrun.EffectiveTiming says where it came from): "-p RuntimeMaxSec=5s"
// when given (in a scope it wins over --runtime-max), else "--runtime-max 10s".
func (f scopeFlags) runtimeLimit(runtimeMax time.Duration) string {
	t := f.timing(0, runtimeMax)
	if t.RuntimeMaxFrom == unitrun.FromProperty {
		return fmt.Sprintf("-p RuntimeMaxSec=%v", t.RuntimeMax)
	}
	return fmt.Sprintf("--runtime-max %v", runtimeMax)
}

// scopeID names the holding a scope is made for: the semaphore and the fencing token.
type scopeID struct {
	name string
	max  int
	rev  int64
}

// scopePlan is where the child of one acquisition will run (D8): in a transient scope
// through conn, or directly when conn is nil.
type scopePlan struct {
	flags   scopeFlags
	conn    *sdbus.Conn
	service systemd.CallerService // the service conch runs in, read before the slot is taken
}

// decideScope decides whether the child will run in a scope (D8): never with --scope=never;
// with auto when systemd is the init system and its manager answers (the system bus as root,
// the user's manager otherwise) and, when conch runs in a service, that service's limits can
// be read (systemd.FindCallerService), else direct mode, with note the line that says so;
// with always (or -p/--slice) the same, but without systemd it returns the error that ends the
// run with 69 (D3). It runs before any etcd call without systemd, beside them with it
// (startPlanning, D8b). The plan must be closed.
func decideScope(f scopeFlags) (plan *scopePlan, note string, err error) {
	p := &scopePlan{flags: f}
	if f.mode == scopeNever {
		return p, "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), scopeDialTimeout)
	defer cancel()
	conn, err := systemd.Dial(ctx)
	if err == nil {
		// the service's slice and limits now, not between the slot and the child (D8)
		if p.service, err = systemd.FindCallerService(ctx, conn); err != nil {
			conn.Close()
		}
	}
	switch {
	case err == nil:
		p.conn = conn
	case f.mode == scopeAlways:
		return nil, "", endf(errUnavailable, "", "cannot run the child in a systemd scope (--scope=always, -p or --slice): %v", err)
	default:
		note = fmt.Sprintf("no systemd scope (%v): the child runs under conch's own supervision", err)
	}
	return p, note, nil
}

// inScope reports whether the child is meant to run in a scope (sema.Record.Scope, D6).
func (p *scopePlan) inScope() bool { return p.conn != nil }

// close closes the bus connection, if any.
func (p *scopePlan) close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

// ownUnit returns the systemd unit conch itself runs in (sema.Record.Unit, D6), "" if none
// or unknown.
func ownUnit() string {
	place, err := systemd.ReadPlacement(0, systemd.UserManager())
	if err != nil {
		return ""
	}
	return place.Unit
}

// run runs the child as spec says, in the transient scope conch-sema-<name>-<rev>.scope when
// the plan has one (D8), with the guardian g started ahead (unitrun.Prepare; nil: Run starts
// one). It returns once the child's tree is gone; g may still be exiting, its owner closes it.
// If that scope cannot be created: with always the error (wrapping unitrun.ErrScopeFailed,
// child not started) is returned, for the caller to release the slot and exit 69; with auto
// conch warns and runs the child in direct mode (D3).
func (p *scopePlan) run(ctx context.Context, rep *reporter, g *unitrun.Prepared, spec unitrun.Spec, id scopeID) (unitrun.Result, error) {
	if p.conn == nil {
		return runWith(ctx, g, spec)
	}
	if !p.conn.Connected() { // the bus went away while we waited for the slot
		if err := p.redial(); err != nil {
			return p.fallback(ctx, rep, g, spec, fmt.Errorf("%s: not started: %w: %w", spec.Path, unitrun.ErrScopeFailed, err))
		}
	}
	scoped := p.scoped(spec, id)
	scoped.Started = func(pid int) { rep.scope = scoped.Scope.Name; spec.Started(pid) } // STATUS= names it (D10)
	res, err := runWith(ctx, g, scoped)
	if res.ScopeStopped && strings.HasSuffix(ownUnit(), ".service") {
		awaitServiceStop(ctx)
	}
	if res.Started || !errors.Is(err, unitrun.ErrScopeFailed) {
		return res, err
	}
	return p.fallback(ctx, rep, nil, spec, err) // g is used up: a fresh guardian
}

// scoped is spec to run in the scope of holding id (D8), or spec itself in direct mode.
func (p *scopePlan) scoped(spec unitrun.Spec, id scopeID) unitrun.Spec {
	if p.conn == nil {
		return spec
	}
	spec.Scope = &unitrun.ScopeSpec{
		Conn:        p.conn,
		Name:        systemd.ScopeName(id.name, id.rev),
		Description: fmt.Sprintf("conch sema %s[max=%d], holder rev %d", id.name, id.max, id.rev),
		Slice:       p.flags.slice,
		Properties:  p.flags.props,
		Service:     p.service,
	}
	return spec
}

// runWith runs spec with the prepared guardian g, or with a guardian of its own when g is nil.
func runWith(ctx context.Context, g *unitrun.Prepared, spec unitrun.Spec) (unitrun.Result, error) {
	if g == nil {
		return unitrun.Run(ctx, spec)
	}
	return g.Run(ctx, spec)
}

// serviceStopWait bounds how long conch waits for its own stop signal after systemd stopped
// the child's scope on its own while conch runs in a service.
const serviceStopWait = 2 * time.Second

// awaitServiceStop waits up to serviceStopWait for ctx to end. The scope is bound to conch's
// service (BindsTo=, D8), so `systemctl stop` of the service stops the scope and signals conch
// at about the same time, and the child can be seen gone before conch's own signal arrives:
// waiting for that signal lets conch end as D3 says for a stopped service (release, then die of the signal: a clean stop for systemd)
// rather than exit with the child's 128+n, which systemd would record as a failure. An
// operator's `systemctl stop` of the scope alone costs this wait, then the child's status.
func awaitServiceStop(ctx context.Context) {
	t := time.NewTimer(serviceStopWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fallback handles a scope that could not be created (D3): always returns err, auto warns
// and runs spec in direct mode, with g if it is still unused (nil: a guardian of its own).
func (p *scopePlan) fallback(ctx context.Context, rep *reporter, g *unitrun.Prepared, spec unitrun.Spec, err error) (unitrun.Result, error) {
	if p.flags.mode == scopeAlways {
		return unitrun.Result{}, err
	}
	rep.warnf("WARNING: %v; running the child under conch's own supervision instead (--scope=auto)", err)
	return runWith(ctx, g, spec)
}

// redial replaces a connection the bus dropped.
func (p *scopePlan) redial() error {
	p.conn.Close()
	p.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), scopeDialTimeout)
	defer cancel()
	conn, err := systemd.Dial(ctx)
	if err != nil {
		return err
	}
	p.conn = conn
	return nil
}
