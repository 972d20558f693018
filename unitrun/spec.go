package unitrun

import (
	"os"
	"slices"
	"syscall"
)

// Spec describes one command to run under a guardian (D7), as Plan.Run or Prestarter.Run is
// given it; how it stops and where it runs are the Plan's. Only Path is required.
type Spec struct {
	// Path is the file to execute, normally the result of Resolve. A relative path is taken
	// relative to Dir.
	Path string
	// Args is the full argv; Args[0] is argv[0]. Empty means {Path}.
	Args []string
	// Env is the command's final environment (the caller has already applied D5). nil means
	// the environment of the calling process; an empty non-nil slice means an empty environment.
	// Nothing else reaches the command through the environment.
	Env []string
	// Dir is the working directory; "" means the caller's.
	Dir string
	// Stdin, Stdout and Stderr are given to the command as they are (D5); nil means /dev/null.
	// The command gets no other descriptor, even one the caller inherited without close-on-exec.
	// When Stdin is a terminal whose foreground process group is the caller's, the command's
	// process group is made the foreground group while it runs and the terminal is handed back
	// to the caller's group afterwards (D5).
	Stdin, Stdout, Stderr *os.File
	// Guardian is the guardian's argv; Guardian[0] is both the path executed and argv[0].
	// Empty means the guardian program (conch-guardian: beside the running executable, or in
	// ../libexec/conch/ from it) when there is one and this binary has a build ID, used once
	// its hello carried that same build ID (D7a); otherwise, and as the fallback whenever the
	// program cannot be started or is of another build, {"/proc/self/exe", GuardianArg}: this
	// program re-executed, the very binary image that is running, even if a package upgrade
	// replaced the file meanwhile, so both ends always speak the same protocol.
	Guardian []string
	// BeforeStart, if set, is called with the guardian's PID while the guardian is alive but has
	// not yet started the command (in scope mode, once the guardian is in its scope). An error
	// makes Run tell the guardian to abort and return that error wrapped, with Result.Started
	// false.
	BeforeStart func(guardianPID int) error
	// Started, if set, is called once with the command's PID as soon as it has started (for
	// READY=1 and logs, D10). It runs on Run's goroutine: it must not block for long.
	Started func(pid int)
	// Deadline, if set, is the lease's deadline as the caller keeps learning it (D7b): the
	// guardian gets every new value and stops the command on its own if the caller goes
	// silent (see Deadline). Nil: the guardian stops the command only when told.
	Deadline *Deadline
	// Warn, if set, is told (on Run's goroutine, in one line without a prefix) about a fault Run
	// worked around: the guardian program was replaced by this program re-executed because it
	// stayed silent, died before its hello or is of another build (D7a). Nil: silent.
	Warn func(msg string)

	// stop is how the command is stopped and limited: the Plan's Timing, set by Plan.scoped
	// (D7). In scope mode its KillAfter is the scope's TimeoutStopSec and its RuntimeMax the
	// scope's RuntimeMaxSec, counted from the scope's start.
	stop StopTiming
	// scope, if set, runs the command in a transient systemd scope (scope mode, D8; set by
	// Plan.scoped); nil means direct mode.
	scope *scopeSpec
}

// Result says how a command ended.
type Result struct {
	// Started is true once the command was executed; false when it never ran (exec failure,
	// BeforeStart error, ctx ended before the start).
	Started bool
	// ExitStatus follows the shell convention (D3): the command's exit code, or 128+n if it died
	// of signal n; -1 when unknown (guardian lost). A command that never started has none (0
	// or -1): Run's error says why, ErrNotFound or ErrNotExecutable when it could not be
	// executed, and the caller chooses the status that goes with it (a shell's 127, 126).
	ExitStatus int
	// Signal is the signal the command died of, 0 if it exited.
	Signal syscall.Signal
	// Stopped is true when Run stopped the still running command because ctx ended.
	Stopped bool
	// RuntimeExceeded is true when Run (or, in scope mode, systemd's RuntimeMaxSec) stopped the
	// still running command because it ran longer than the Plan's RuntimeMax (D7).
	RuntimeExceeded bool
	// Fenced is true when the guardian stopped the still running command on its own because
	// Spec.Deadline came while the caller was silent (stopped, frozen, stuck: D7b): the caller
	// exits as for a lost slot. Stopped may be set too, when the caller asked afterwards.
	Fenced bool
	// ScopeStopped is true in scope mode when systemd stopped the scope on its own while the
	// command ran, not at Run's request nor for RuntimeMax: the caller's service stopping
	// (BindsTo=, D8) or an operator's `systemctl stop` of the scope.
	ScopeStopped bool
}

// withDefaults returns a copy of s with the documented defaults filled in, but for the stop
// timing, which the Plan decides (effectiveTiming: the one place it is defaulted).
func (s Spec) withDefaults() Spec {
	if len(s.Args) == 0 {
		s.Args = []string{s.Path}
	}
	if s.Env == nil {
		s.Env = os.Environ()
	}
	if len(s.Guardian) == 0 {
		s.Guardian = defaultGuardian()
	}
	return s
}

// sameStart reports whether t asks for the guardian that s started: the same Guardian argv
// and the same Stdin, Stdout and Stderr (prepare, prepared.run).
func (s Spec) sameStart(t Spec) bool {
	return slices.Equal(s.Guardian, t.Guardian) && s.Stdin == t.Stdin && s.Stdout == t.Stdout && s.Stderr == t.Stderr
}
