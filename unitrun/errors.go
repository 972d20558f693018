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
	// (systemd.ErrUnitExists, ErrAccessDenied, ErrBusUnavailable, ErrJobFailed, ErrNotInScope...).
	// A caller that needs the scope gives up here; one that can do without it may run the
	// command in direct mode (D8).
	ErrScopeFailed = errors.New("cannot run the command in a systemd scope")
)
