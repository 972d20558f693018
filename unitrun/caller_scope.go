package unitrun

// This file runs in the caller's process (conch): scope mode (D8), scopeSpec and Run's state
// while its command runs in a scope.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"syscall"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/conch-project/conch/internal/systemd"
)

// Scope mode's timing.
const (
	// defaultScopeTimeout bounds the start of a scope when scopeSpec.Timeout is 0: reading the
	// service's limits, StartTransientUnit, its job and the cgroup check. A healthy manager
	// needs 8-22 ms (TESTING-INFRA.md); systemd's own D-Bus timeout is 25 s.
	defaultScopeTimeout = 10 * time.Second

	// scopeStopMargin is added to the grace period (TimeoutStopSec) when Run waits for a
	// stopped scope to be gone: systemd needs a moment after its SIGKILL to reap and collect.
	scopeStopMargin = 5 * time.Second
)

// scopeSpec asks Run for scope mode (D8): the guardian of D7 is moved into a new transient
// scope before it starts the command, so the command and everything it starts are in the scope
// from the command's first instruction, and stopping the command is systemd's job.
type scopeSpec struct {
	// Conn is the connection to the manager that owns the scope (systemd.Dial). Required.
	// Run only uses it; the caller closes it after Run returns.
	Conn *sdbus.Conn
	// Name is the unit name (systemd.ScopeName). Required.
	Name string
	// Description is shown by systemctl status (D8).
	Description string
	// Slice is the scope's slice (systemd.SliceName); "" means the slice of the service the caller runs in, if any, else the
	// manager's default.
	Slice string
	// Properties are the caller's scope properties (systemd.ParseProperties). They are set last and so override
	// everything else, the limits inherited from the caller's service included (D8). The
	// Plan's timing comes from them too: KillSignal is the stop signal, TimeoutStopSec the
	// grace period and RuntimeMaxSec the runtime limit (infinity means none): see
	// effectiveTiming.
	Properties []sdbus.Property
	// Service is the service the caller runs in (systemd.FindCallerService, read before the
	// slot is taken): the scope goes into its slice (unless Slice is set), gets BindsTo= it and its
	// resource-control settings (D8). The zero value binds the scope to nothing.
	Service systemd.CallerService
	// Timeout bounds the start of the scope; defaultScopeTimeout if <= 0.
	Timeout time.Duration
}

// scopeRun is Run's scope-mode state.
type scopeRun struct {
	scopeSpec
	killAfter  time.Duration
	runtimeMax time.Duration // the stop timing's RuntimeMax, also the scope's RuntimeMaxSec
	started    time.Time     // just before StartScope: systemd's RuntimeMaxSec counts from later
	stopping   chan error    // StopScope's result, once a stop was begun; buffered
	waiting    bool          // being prepared ahead of the slot: described as waiting (D8b)
	prepared   bool          // created ahead of the slot with the guardian in it (D8b)
	relabeled  chan struct{} // closed when relabel's call has ended; nil if none was begun
}

// wireScope returns what the guardian needs to know about the scope: its name and how to reach
// its manager, found as Connect finds it, from the caller's environment.
func (sc *scopeRun) wire() *wireScope {
	return &wireScope{Unit: sc.Name, Addrs: systemd.ManagerAddresses()}
}

// start creates the scope with the guardian (pid) in it (D8): in sc.Service's slice (unless
// Slice is set), bound to it (BindsTo=, not After=: see ScopeRequest.BindTo), with its
// resource-control settings, then spec.stop.RuntimeMax as RuntimeMaxSec, then the caller's properties.
// ctx and Timeout bound it. The error wraps ErrScopeFailed, or is ctx's cause when ctx ended
// (the slot was lost meanwhile).
func (sc *scopeRun) start(ctx context.Context, spec Spec, pid int) error {
	tctx, cancel := context.WithTimeout(ctx, sc.Timeout)
	defer cancel()
	req := systemd.ScopeRequest{
		Name:        sc.Name,
		Description: sc.description(),
		PIDs:        []int{pid},
		Slice:       cmp.Or(sc.Slice, sc.Service.Slice),
		BindTo:      sc.Service.Unit,
		KillAfter:   spec.stop.KillAfter,
		Properties:  slices.Clone(sc.Service.Inherited),
	}
	if spec.stop.RuntimeMax > 0 {
		req.Properties = append(req.Properties, systemd.RuntimeMaxProperty(spec.stop.RuntimeMax))
	}
	req.Properties = append(req.Properties, sc.Properties...)
	sc.started = time.Now()
	if err := systemd.StartScope(tctx, sc.Conn, req); err != nil {
		return sc.startError(ctx, spec.Path, err)
	}
	return nil
}

func (sc *scopeRun) startError(ctx context.Context, path string, err error) error {
	if ctx.Err() != nil {
		return notStarted(path, context.Cause(ctx))
	}
	return fmt.Errorf("%s: not started: %w: %w", path, ErrScopeFailed, err)
}

// beginStop begins stopping the scope on a goroutine of its own (StopScope: systemd's stop signal
// to every process in it, SIGKILL after TimeoutStopSec, then wait until it is gone), once;
// awaitGone receives the result.
func (sc *scopeRun) beginStop() {
	if sc.stopping != nil {
		return
	}
	sc.stopping = make(chan error, 1)
	go func() {
		sc.stopping <- sc.stopNow()
	}()
}

// stopNow stops the scope and waits until it is gone, bounded by the grace period plus
// scopeStopMargin (a fresh context: the caller's has usually ended).
func (sc *scopeRun) stopNow() error {
	wait := sc.killAfter + scopeStopMargin
	if wait < sc.killAfter { // overflow: TimeoutStopSec=infinity
		wait = math.MaxInt64
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return systemd.StopScope(ctx, sc.Conn, sc.Name)
}

// awaitGone returns once the scope is gone, or why that cannot be confirmed: it waits for the
// stop begun by beginStop, or, when none was, stops the scope now. Stopping a scope that emptied
// when the command's tree ended, or that systemd already collected, takes one round trip.
func (sc *scopeRun) awaitGone() error {
	if sc.stopping == nil {
		return sc.stopNow()
	}
	return <-sc.stopping
}

// outcome completes a scope-mode Result once the guardian has exited and the scope is gone
// (goneErr nil) or could not be confirmed gone. base and baseErr are what finish made of the
// guardian's reports, as in direct mode; guardianErr is the guardian's wait result.
//
// The command's tree is gone when the guardian said so (evExited) or when the scope is gone.
// A guardian that ended without evExited is expected when the scope was being stopped (by Run,
// or by systemd on its own: evStopSignal, or the guardian's death by SIGKILL, which only the
// end of the scope's TimeoutStopSec or KillSignal=SIGKILL deliver): the command then died with
// the scope, of SIGKILL if the guardian could not report its status.
//
// Stopped and RuntimeExceeded are set when Run asked for the stop before the command exited;
// RuntimeExceeded also when systemd stopped the scope on its own at or after RuntimeMax from
// the scope's start (its RuntimeMaxSec fired before Run's own timer), ScopeStopped when it did
// so earlier.
func (sc *scopeRun) outcome(rec *runRecord, baseErr, guardianErr, goneErr error) (Result, error) {
	if rec.pid == 0 {
		return decideResult(rec.facts), baseErr
	}
	f := rec.facts
	f.guardianKilled = killedBy(guardianErr, syscall.SIGKILL)
	f.scopeGone = goneErr == nil
	ended := rec.cmdEndedAt
	if !rec.cmdExited {
		ended = time.Now() // with the scope, or unknown
	}
	f.pastRuntimeMax = sc.runtimeMax > 0 && ended.Sub(sc.started) >= sc.runtimeMax
	res := decideResult(f)
	expected := f.asked != notStopping || f.systemdStop || f.guardianKilled
	switch {
	case rec.exited:
		return res, nil
	case goneErr != nil:
		return res, fmt.Errorf("%w; scope %s could not be stopped: %v", baseErr, sc.Name, goneErr)
	case expected:
		return res, nil // the scope, and with it the command's tree, is gone
	}
	return res, fmt.Errorf("%w; scope %s stopped", baseErr, sc.Name)
}

// killedBy reports whether err is a process's wait error saying it died of sig.
func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
