package systemd

import "errors"

// Sentinel errors of the package. Functions wrap them with %w together with the unit,
// property or address they concern; callers test them with errors.Is, never by their text.
// D-Bus error names are translated into them (dbusError), the original error kept in the
// chain.
var (
	// ErrBadProperty means a NAME=VALUE assignment names no property that a scope accepts
	// (systemd.scope(5), systemd.resource-control(5), systemd.kill(5)) or has a value that
	// property does not take, or a slice name is not valid. Parsing finds it, before
	// anything runs (D8).
	ErrBadProperty = errors.New("bad scope property")

	// ErrNoSystemd means systemd is not the init system here (/run/systemd/system is
	// missing): no scope can be made here (D8).
	ErrNoSystemd = errors.New("systemd is not running")

	// ErrBusUnavailable means neither the system bus (as root) nor the user manager's bus
	// (otherwise) answered (D8).
	ErrBusUnavailable = errors.New("systemd bus unavailable")

	// ErrUnitExists is systemd's org.freedesktop.systemd1.UnitExists: a unit of that name is
	// already loaded.
	ErrUnitExists = errors.New("unit already exists")

	// ErrNoSuchUnit is systemd's org.freedesktop.systemd1.NoSuchUnit: no unit of that name.
	ErrNoSuchUnit = errors.New("no such unit")

	// ErrAccessDenied is D-Bus's AccessDenied (or InteractiveAuthorizationRequired): the
	// caller may not manage that unit on that bus.
	ErrAccessDenied = errors.New("access denied")

	// ErrJobFailed means systemd ran the start or stop job of a scope but its result was not
	// "done" (e.g. "failed", "canceled", "timeout", "dependency").
	ErrJobFailed = errors.New("systemd job did not succeed")

	// ErrNotInScope means a process that StartScope was to move into the scope is not in the
	// scope's cgroup once the start job is done (it may have exited).
	ErrNotInScope = errors.New("process not in the scope's cgroup")

	// ErrNotInService means the process does not run in a systemd service (Placement.Service).
	ErrNotInService = errors.New("not running in a systemd service")
)
