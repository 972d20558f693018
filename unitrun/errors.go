package unitrun

import "errors"

// Sentinel errors of the package. Functions wrap them with %w together with the command or unit
// name; callers test them with errors.Is, never by their text.
var (
	// ErrNotFound means the command does not exist: not found in $PATH, or the path names
	// nothing. The caller exits 127 (shell convention, D3).
	ErrNotFound = errors.New("command not found")

	// ErrNotExecutable means the command exists but cannot be executed: no execute permission,
	// a directory, a bad "#!" interpreter, a format the kernel refuses, or a working directory
	// that cannot be entered. The caller exits 126 (shell convention, D3).
	ErrNotExecutable = errors.New("command cannot be executed")

	// ErrGuardian means the guardian process (D7) could not be started, broke its protocol or
	// died before reporting how the command ended. Run then falls back to killing the command's
	// process group itself; descendants that left that group may be out of its reach.
	ErrGuardian = errors.New("guardian failed")
)
