package unitrun

import "errors"

// Sentinel errors of scope mode (D8). Functions wrap them with %w together with the unit or
// property name; callers test them with errors.Is. (Kept beside errors.go's block, which
// belongs to direct mode, so that two engineers did not edit one file at once.)
var (
	// ErrBadProperty means a -p NAME=VALUE assignment names no property that a scope accepts
	// (systemd.scope(5), systemd.resource-control(5), systemd.kill(5)) or has a value that
	// property does not take. It is found before any etcd call; the caller exits 64 (D8).
	ErrBadProperty = errors.New("bad scope property")

	// ErrNoSystemd means systemd is not the init system here (/run/systemd/system is
	// missing): --scope=auto runs in direct mode, --scope=always exits 69 (D8).
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
