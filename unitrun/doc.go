// Package unitrun runs the command of `conch sema` and makes sure it, and everything it
// starts, ends when conch says so or when conch itself dies (D7).
//
// A caller builds one Plan (StartPlan): how commands stop (its Timing: the stop signal, the
// grace before SIGKILL, the runtime limit, decided once from the caller's Options and reported
// back), and whether they run in a transient scope. It runs a command with Plan.Run, or, when
// it starts the guardian ahead while it waits for its slot, with Plan.Prestart and
// Prestarter.Run.
//
// Direct mode: Run starts a small guardian (GuardianMain) that is the command's parent and a
// child subreaper: the guardian program cmd/conch-guardian beside the running executable when
// it is of the same build (its build ID, D7a), else this program re-executed. The command runs in
// its own process group; stopping it means the stop signal to that group and to every
// descendant (found through /proc), then SIGKILL after the grace period. The guardian gets a
// parent-death signal when conch dies, even by SIGKILL, and then stops the whole tree itself.
// A Prestarter starts the guardian ahead of the command, so that its start-up overlaps the
// caller's wait for a slot; its Run then gives it the command and returns as soon as the
// command's tree is gone, while the guardian exits.
//
// Scope mode (D8) uses the same guardian and moves it into a transient systemd
// scope before it starts the command, so the command runs not a single instruction outside
// the scope. Stopping is then systemd's job (the scope's KillSignal, SIGKILL after
// TimeoutStopSec); the guardian stays the command's parent inside the scope, reports its
// status, and stops its own scope over D-Bus when conch dies (D7). The systemd plumbing
// (the manager's connection, scope properties, placement, journal streams) is package
// internal/systemd's; unitrun decides when a scope is made and stopped: the Plan, decided
// beside the caller's own start-up, says whether commands run in scopes and runs them so,
// falling back to direct mode where its ScopeMode allows; a Prestarter keeps a guardian
// started ahead of the command, as the caller says it wants one.
//
// The package holds code for two processes, the caller (conch) and the guardian, which talk
// over two pipes (protocol.go). A file's name says which side it is on: run.go and
// caller_*.go run in the caller, guardian_*.go in the guardian; the other files (protocol,
// process tree) are used by either.
//
// The package imports only the standard library, go-systemd, godbus, x/sys and
// internal/systemd: never sema, never etcd. It does not log, exit or install signal handlers, except in GuardianMain, which
// is the guardian process's main.
package unitrun
