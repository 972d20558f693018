// Package unitrun runs the command of `conch sema` and makes sure it, and everything it
// starts, ends when conch says so or when conch itself dies (D7).
//
// Direct mode: Run re-executes the program as a small guardian (GuardianMain) that is the
// command's parent and a child subreaper. The command runs in its own process group; stopping
// it means the stop signal to that group and to every descendant found in /proc, then SIGKILL
// after the grace period. The guardian gets a parent-death signal when conch dies, even by
// SIGKILL, and then stops the whole tree itself.
//
// Scope mode (D8) uses the same guardian and moves it into a transient systemd scope through
// Spec.BeforeStart, before the command runs a single instruction.
//
// The package imports only the standard library, go-systemd, godbus and x/sys: never sema,
// never etcd. It does not log, exit or install signal handlers, except in GuardianMain, which
// is the guardian process's main.
package unitrun
