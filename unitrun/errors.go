package unitrun

import "errors"

// Sentinel errors of the package, for direct mode, the guardian (D3, D7) and scope mode (D8).
// Functions wrap them with %w together with the command, unit or property name; callers test
// them with errors.Is, never by their text.
var (
	// ErrNotFound means the command does not exist: not found in $PATH, or the path names
	// nothing (a shell would say 127).
	ErrNotFound = errors.New("command not found")

	// ErrNotExecutable means the command exists but cannot be executed: no execute permission,
	// a directory, a bad "#!" interpreter, a format the kernel refuses, or a working directory
	// that cannot be entered (a shell would say 126).
	ErrNotExecutable = errors.New("command cannot be executed")

	// ErrGuardian means the guardian process (D7) could not be started, broke its protocol,
	// died before reporting how the command ended, or (direct mode) did not report the tree
	// gone within KillAfter plus a margin after a stop request (stopped or hung: Run kills it).
	// Run then stops the command's tree itself (direct mode: the caller is a child subreaper,
	// so the command and all its descendants are reparented to it) or stops the scope (scope
	// mode).
	ErrGuardian = errors.New("guardian failed")

	// ErrNoGrace, in the cause of the context given to Run, makes the stop that the
	// context's end asks for skip the grace: SIGKILL to the command's whole tree at once
	// (D7b: the caller learnt too late that it must stop, so every moment counts). It is
	// the caller's to wrap into its cause; Run never returns it.
	ErrNoGrace = errors.New("stop at once, without the grace")

	// ErrScopeFailed means Run in scope mode could not create the transient scope or move the
	// guardian into it; the command never started. The chain also holds StartScope's error
	// (ErrUnitExists, ErrAccessDenied, ErrBusUnavailable, ErrJobFailed, ErrNotInScope...).
	// A caller that needs the scope gives up here; one that can do without it may run the
	// command in direct mode (D8).
	ErrScopeFailed = errors.New("cannot run the command in a systemd scope")

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
