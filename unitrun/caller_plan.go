package unitrun

// This file runs in the caller's process (conch): deciding whether commands run in a scope
// (D8) and running them as decided, falling back to direct mode where that is allowed.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/conch-project/conch/internal/systemd"
)

// DefaultDialTimeout bounds finding systemd and its manager when a Plan is decided (D8). It is
// spent only on hosts where systemd is the init system.
const DefaultDialTimeout = 5 * time.Second

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

// ScopeOptions is what the caller asks of its commands' scopes (D8).
type ScopeOptions struct {
	Mode ScopeMode
	// Properties are ScopeSpec.Properties (systemd.ParseProperties); they also set the stop
	// timing (EffectiveTiming).
	Properties []sdbus.Property
	// Slice is ScopeSpec.Slice (systemd.SliceName): "" means the caller's service's slice.
	Slice string
}

// ScopeUnit names the scope of one command (Plan.Run, Plan.Scoped).
type ScopeUnit struct {
	Name        string // the unit name, e.g. systemd.ScopeName
	Description string // shown by systemctl status
	// Started, if set, replaces Spec.Started when the command starts in this scope (not when
	// it runs directly after all), so the caller learns that the scope holds it.
	Started func(pid int)
}

// Plan is where the caller's commands run (D8): in transient scopes through one manager
// connection, or directly. DecideScope makes it; Close releases it.
type Plan struct {
	opts     ScopeOptions
	conn     *sdbus.Conn           // nil: direct mode
	service  systemd.CallerService // the service the caller runs in, read before any slot
	fallback error                 // why ScopeAuto runs directly, nil otherwise
}

// DecideScope decides where commands will run (D8): directly with ScopeNever; otherwise in
// scopes when systemd is the init system, its manager answers within DefaultDialTimeout and,
// when the caller runs in a service, that service's slice and limits can be read
// (systemd.FindCallerService: read now, not between a slot and the command). Else ScopeAuto
// gets a direct Plan whose Fallback says why, and ScopeAlways gets that reason as its error
// (wrapping systemd.ErrNoSystemd, systemd.ErrBusUnavailable or the service's read error)
// and no Plan. It blocks for at most DefaultDialTimeout. The Plan must be closed.
func DecideScope(opts ScopeOptions) (*Plan, error) {
	p := &Plan{opts: opts}
	if opts.Mode == ScopeNever {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultDialTimeout)
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
	case opts.Mode == ScopeAlways:
		return nil, err
	default:
		p.fallback = err
	}
	return p, nil
}

// InScope reports whether commands are meant to run in a scope.
func (p *Plan) InScope() bool { return p.conn != nil }

// Fallback returns why a ScopeAuto Plan runs commands directly, nil when it does not.
func (p *Plan) Fallback() error { return p.fallback }

// Close closes the manager connection, if any. Call it after every Run has returned and every
// Prepared given a Scoped spec is closed (its prepared scope is stopped through it).
func (p *Plan) Close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

// Scoped returns spec to run in scope unit (ScopeSpec from the Plan's options and service),
// or spec itself in direct mode: what Run, or Prepared.Preload ahead of the slot, is given.
func (p *Plan) Scoped(spec Spec, unit ScopeUnit) Spec {
	if p.conn == nil {
		return spec
	}
	if unit.Started != nil {
		spec.Started = unit.Started
	}
	spec.Scope = &ScopeSpec{Conn: p.conn, Name: unit.Name, Description: unit.Description,
		Slice: p.opts.Slice, Properties: p.opts.Properties, Service: p.service}
	return spec
}

// Run runs spec as the Plan says, in scope unit or directly, with the prepared guardian g (nil:
// Run starts one), and returns Run's result and error. It redials a manager connection that
// was lost since DecideScope. When the scope cannot be created (an error wrapping
// ErrScopeFailed, the command not started), ScopeAlways returns that error; ScopeAuto passes
// it to warn (if set) and runs spec directly, with a fresh guardian if g was used up. When
// systemd stopped the scope on its own and the caller runs in a service, Run waits up to
// serviceStopWait for ctx to end (awaitServiceStop) before it returns.
func (p *Plan) Run(ctx context.Context, g *Prepared, spec Spec, unit ScopeUnit, warn func(error)) (Result, error) {
	if p.conn == nil {
		return runWith(ctx, g, spec)
	}
	if !p.conn.Connected() { // the bus went away while the caller waited
		if err := p.redial(); err != nil {
			err = fmt.Errorf("%s: not started: %w: %w", spec.Path, ErrScopeFailed, err)
			return p.orDirect(ctx, g, spec, err, warn)
		}
	}
	res, err := runWith(ctx, g, p.Scoped(spec, unit))
	if res.ScopeStopped && strings.HasSuffix(systemd.OwnUnit(), ".service") {
		awaitServiceStop(ctx)
	}
	if res.Started || !errors.Is(err, ErrScopeFailed) {
		return res, err
	}
	return p.orDirect(ctx, nil, spec, err, warn) // g is used up: a fresh guardian
}

// orDirect handles a scope that could not be created: ScopeAlways returns err, ScopeAuto
// tells warn and runs spec directly, with g if it is still unused.
func (p *Plan) orDirect(ctx context.Context, g *Prepared, spec Spec, err error, warn func(error)) (Result, error) {
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
	ctx, cancel := context.WithTimeout(context.Background(), DefaultDialTimeout)
	defer cancel()
	conn, err := systemd.Dial(ctx)
	if err != nil {
		return err
	}
	p.conn = conn
	return nil
}

// runWith runs spec with the prepared guardian g, or with a guardian of its own when g is nil.
func runWith(ctx context.Context, g *Prepared, spec Spec) (Result, error) {
	if g == nil {
		return Run(ctx, spec)
	}
	return g.Run(ctx, spec)
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
