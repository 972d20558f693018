package systemd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// scopePollInterval is how often StopScope re-checks that a stopped scope is gone.
const scopePollInterval = 10 * time.Millisecond

// ScopeRequest describes the transient scope StartScope creates (D8).
type ScopeRequest struct {
	// Name is the unit name, normally ScopeName(sema, rev); it must end in ".scope".
	Name string
	// Description names the semaphore and the revision (shown by systemctl status).
	Description string
	// PIDs are the processes to move into the scope (the guardian of D7, held before it runs
	// the command); at least one. They must be in the caller's PID namespace.
	PIDs []int
	// Slice puts the scope in that slice; "" leaves the manager's default. D8: the slice of the
	// service the caller runs in (Placement.Slice), or one the caller chose.
	Slice string
	// KillAfter is the scope's TimeoutStopSec: after a stop sends the stop signal, systemd waits
	// that long and SIGKILLs what is left (D7). <= 0 leaves the manager's
	// DefaultTimeoutStopSec; a TimeoutStopSec among Properties replaces it.
	KillAfter time.Duration
	// Properties are set after StartScope's own and so override them; later ones override
	// earlier ones: pass the service's inherited limits (InheritedProperties) first, then the
	// -p ones (ParseProperties), D8.
	Properties []sdbus.Property
	// BindTo is the service conch runs in (Placement.Service): the scope gets BindsTo= on
	// it, so stopping the service stops the command (D8). "" for none.
	//
	// Not After=, although D8 names it: the scope's start job would then wait for the
	// service's start job, and a service running conch is still starting while conch starts
	// its child (Type=oneshot until conch exits, Type=notify until READY=1, which conch sends
	// once the child runs): the two jobs deadlock until the scope's start times out. Without
	// After=, stopping the service stops the scope at the same time as conch.
	BindTo string
}

// StartScope creates the transient scope req describes and moves req.PIDs into it (D8). The
// scope gets Description, PIDs, TimeoutStopUSec=KillAfter, SendSIGKILL=yes,
// KillMode=control-group (a scope has no main process: mixed would SIGKILL everything at once),
// CollectMode=inactive-or-failed (no finished scope lingers), Slice, BindsTo= the service
// (not After=, see BindTo), then req.Properties.
//
// StartTransientUnit only enqueues a job: StartScope registers for the job's JobRemoved signal
// as it calls (go-systemd's connection subscribed when it was made; the result channel is
// buffered, so a result arriving after ctx ended blocks nobody), requires the result "done", and
// then checks in /proc/PID/cgroup that every PID landed in the scope's cgroup. ctx bounds the
// call and the wait; give it the same deadline as Connect. It returns when the job's result
// arrives or ctx ends.
//
// Errors name the unit and wrap ErrUnitExists (a unit of that name is loaded), ErrAccessDenied,
// ErrBusUnavailable, ErrJobFailed (job result not "done"), ErrNotInScope (a PID is not in the
// scope, e.g. it exited), or ctx's error. If ctx ends while the job runs the scope may still
// appear; it holds only req.PIDs, so it goes away once they exit.
func StartScope(ctx context.Context, conn *sdbus.Conn, req ScopeRequest) error {
	if !validUnitName(req.Name) || !strings.HasSuffix(req.Name, ".scope") {
		return fmt.Errorf("cannot start scope %q: not a valid scope unit name", req.Name)
	}
	if len(req.PIDs) == 0 {
		return fmt.Errorf("cannot start scope %s: no process to put in it", req.Name)
	}
	result := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, req.Name, "fail", scopeProperties(req), result); err != nil {
		return fmt.Errorf("cannot start scope %s: %w", req.Name, dbusError(err))
	}
	if err := waitJob(ctx, result); err != nil {
		return fmt.Errorf("cannot start scope %s: %w", req.Name, err)
	}
	for _, pid := range req.PIDs {
		if err := checkInScope(pid, req.Name); err != nil {
			return fmt.Errorf("cannot start scope %s: %w", req.Name, err)
		}
	}
	return nil
}

// scopeProperties returns the D-Bus properties of the scope req describes, in the order
// StartScope passes them (later ones override earlier ones).
func scopeProperties(req ScopeRequest) []sdbus.Property {
	pids := make([]uint32, len(req.PIDs))
	for i, pid := range req.PIDs {
		pids[i] = uint32(pid)
	}
	props := []sdbus.Property{
		sdbus.PropPids(pids...),
		prop("SendSIGKILL", true),
		prop("KillMode", "control-group"),
		prop("CollectMode", "inactive-or-failed"),
	}
	if req.KillAfter > 0 && !slices.ContainsFunc(req.Properties, func(p sdbus.Property) bool { return p.Name == "TimeoutStopUSec" }) {
		// once: a TimeoutStopSec among req.Properties is the grace, KillAfter then says the same
		props = append(props, prop("TimeoutStopUSec", uint64(req.KillAfter.Microseconds())))
	}
	if req.Description != "" {
		props = append(props, sdbus.PropDescription(req.Description))
	}
	if req.Slice != "" {
		props = append(props, sdbus.PropSlice(req.Slice))
	}
	if req.BindTo != "" {
		props = append(props, sdbus.PropBindsTo(req.BindTo))
	}
	return append(props, req.Properties...)
}

// waitJob waits for a job's result on result and returns nil if it is "done", an error
// wrapping ErrJobFailed for any other result, or ctx's error.
func waitJob(ctx context.Context, result <-chan string) error {
	select {
	case r := <-result:
		if r != "done" {
			return fmt.Errorf("%w: job result %q", ErrJobFailed, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the job: %w", ctx.Err())
	}
}

// checkInScope checks that process pid is in the cgroup of unit scope, as the manager that
// owns the scope tracks it. A new scope has no sub-cgroups, so its cgroup is the process's.
func checkInScope(pid int, scope string) error {
	p, err := ReadPlacement(pid, false)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotInScope, err)
	}
	if cgUnescape(path.Base(p.Cgroup)) != scope {
		return fmt.Errorf("%w: process %d is in %s", ErrNotInScope, pid, p.Cgroup)
	}
	return nil
}

// StopScope stops scope name and waits until it is gone (D7, D8): systemd sends the scope's
// KillSignal to every process in it, SIGKILLs what is left after its TimeoutStopSec, and, with
// CollectMode=inactive-or-failed, forgets it. ctx must allow for that grace period; it bounds
// the call and the wait. It returns nil if the scope is gone (also when it did not exist), or
// an error naming the unit and wrapping ErrAccessDenied, ErrBusUnavailable, ErrJobFailed or
// ctx's error.
func StopScope(ctx context.Context, conn *sdbus.Conn, name string) error {
	result := make(chan string, 1)
	if _, err := conn.StopUnitContext(ctx, name, "replace", result); err != nil {
		if err = dbusError(err); errors.Is(err, ErrNoSuchUnit) {
			return nil
		}
		return fmt.Errorf("cannot stop scope %s: %w", name, err)
	}
	if err := waitJob(ctx, result); err != nil {
		return fmt.Errorf("cannot stop scope %s: %w", name, err)
	}
	for {
		units, err := conn.ListUnitsByNamesContext(ctx, []string{name})
		if err != nil {
			return fmt.Errorf("cannot stop scope %s: %w", name, dbusError(err))
		}
		if len(units) == 0 || units[0].LoadState == "not-found" ||
			units[0].ActiveState == "inactive" || units[0].ActiveState == "failed" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot stop scope %s: still %s: %w", name, units[0].ActiveState, ctx.Err())
		case <-time.After(scopePollInterval):
		}
	}
}
