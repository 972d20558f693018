// Command conch runs commands under cluster-wide limits kept in etcd:
// `conch sema <name> --max N -- <cmd...>` (04_sema.md). This package is the
// CLI only: flags, configuration, signals, the exit-status table and
// logging; the connection to etcd is in internal/etcdconn, the recipe in
// package sema and child supervision in unitrun.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/unitrun"
	"github.com/jessevdk/go-flags"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == unitrun.GuardianArg {
		os.Exit(unitrun.GuardianMain())
	}
	go etcdconn.WarmProtobuf() // off the critical path: internal/etcdconn/protowarm.go
	// A closed stderr pipe must not kill conch with SIGPIPE in the middle of
	// its queue (its key would linger until expiry): with SIGPIPE caught,
	// writes fail with EPIPE instead. Caught, not ignored, so the child
	// gets the default disposition.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	args := cloneArgs(os.Args[1:])
	scrubSecrets() // no password in /proc/PID/environ or cmdline (D5a)
	err := runCLI(args, os.Stdout, os.Stderr, os.Getenv)
	status, sig := exitStatus(err)
	if sig != 0 {
		reraise(sig, signalsGroup(err))
	}
	os.Exit(status)
}

// usageError is a bad flag or argument: exit 64, nothing written to etcd.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// run parses args (without the program name) and runs the command. It
// returns the exit status, or a signal conch must re-raise on itself after
// cleaning up (D3): exitStatus of runCLI's error.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) (int, syscall.Signal) {
	return exitStatus(runCLI(args, stdout, stderr, getenv))
}

// runCLI parses args (without the program name), runs the command, writes
// the line that says why it ended (report) and returns the error it ended
// with, for exitStatus.
func runCLI(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	before, command, dashdash := splitCommand(args)
	s := semaCmd{command: command, dashdash: dashdash, stdout: stdout, stderr: stderr, getenv: getenv}
	err := s.parseAndRun(before)
	rep := s.rep
	if rep == nil { // the run ended before it had a semaphore to report on
		rep = newReporter(stderr, getenv, s.Verbose, "", 0)
		rep.bare = true
	}
	report(rep, err)
	return err
}

// parseAndRun parses the arguments before "--" and runs what they ask for: the semaphore's
// run (semaCmd.Execute), or help, the version, the man page or shell completions.
func (s *semaCmd) parseAndRun(before []string) error {
	if len(before) > 0 && !strings.HasPrefix(before[0], "-") && before[0] != "sema" && before[0] != "fleetlock" && s.getenv("GO_FLAGS_COMPLETION") == "" {
		hint := "conch's commands are sema and fleetlock"
		switch {
		case before[0] == "version":
			hint = "did you mean conch --version?"
		case strings.HasPrefix("sema", before[0]) || strings.HasPrefix(before[0], "sem"):
			hint = "did you mean conch sema?"
		case strings.HasPrefix("fleetlock", before[0]) || strings.HasPrefix(before[0], "fleet"):
			hint = "did you mean conch fleetlock?"
		}
		return usagef("unknown command %q: %s\nTry 'conch sema --help'.", before[0], hint)
	}
	cmd, epilog := "sema", ""
	if slices.Contains(before, "fleetlock") && !slices.Contains(before, "sema") {
		cmd, epilog = "fleetlock", fleetlockEpilog
	}
	var g globalOptions
	p := newParser(&g, s)
	p.SubcommandsOptional = true
	completed := false
	words := joinNegativeValues(before)                    // flagstyle.go
	p.CompletionHandler = func(items []flags.Completion) { // GO_FLAGS_COMPLETION (shell completion)
		completed = true
		if namePosition(p, words) { // <name>: the live semaphores' names, or nothing (completename.go)
			s.completeNames(s.stdout, words[len(words)-1])
			return
		}
		printCompletions(s.stdout, items, s.getenv("GO_FLAGS_COMPLETION") == "verbose")
	}
	_, err := p.ParseArgs(words)
	var ferr *flags.Error
	switch {
	case completed:
		return nil
	case errors.As(err, &ferr) && ferr.Type == flags.ErrHelp && p.Active != nil && p.Active.Name == "sema":
		writeSemaHelp(s.stdout, newParser(&globalOptions{}, &semaCmd{})) // the short form; the rest is man conch
		return nil
	case errors.As(err, &ferr) && ferr.Type == flags.ErrHelp && p.Active != nil && p.Active.Name == "fleetlock":
		fmt.Fprintln(s.stdout, ferr.Message)
		fmt.Fprintln(s.stdout)
		fmt.Fprint(s.stdout, epilog)
		return nil
	case errors.As(err, &ferr) && ferr.Type == flags.ErrHelp:
		fmt.Fprintln(s.stdout, ferr.Message) // conch --help: the commands; each has its own --help
		return nil
	case err != nil && errors.As(err, &ferr) && ferr.Type == flags.ErrUnknownFlag && hinted(p, ferr, before):
		hint, _ := unknownFlagHint(p, ferr, before)
		return usagef("%s\nTry 'conch %s --help'.", hint, cmd)
	case err != nil && errors.As(err, &ferr) && ferr.Type == flags.ErrUnknownFlag && !s.dashdash && cmd == "sema":
		// `conch sema x --max 1 ls -l`: the child's flags were read as conch's
		return usagef("%v: the command and its arguments go after --, as in: conch sema NAME --max N -- CMD ARGS...\nTry 'conch sema --help'.", plainFlagError(err))
	case errors.As(err, new(*exitError)): // its own line says what to do (configAccessError)
		return err
	case err != nil:
		return usagef("%v\nTry 'conch %s --help'.", plainFlagError(err), cmd)
	case g.Version:
		fmt.Fprintf(s.stdout, "conch %s\n", versionString())
		return nil
	case g.ManPage:
		// A fresh parser: ParseArgs added help groups to p, which would
		// print twice.
		if err := writeManPage(s.stdout, newParser(&globalOptions{}, &semaCmd{})); err != nil {
			return endf(errUnavailable, "", "%v", err)
		}
		return nil
	case s.run == nil:
		p.WriteHelp(s.stderr)
		return silent(errUsage)
	}
	return s.run()
}

// splitCommand splits argv at the first "--": the child's argv after it is
// passed on untouched: conch never reads the child's flags as its own.
func splitCommand(args []string) (before, command []string, dashdash bool) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil, false
	}
	return args[:i], args[i+1:], true
}

// reraise dies of sig, so shells report 128+n and systemd sees a clean stop
// (D3). With group, sig goes to conch's whole process group, as the
// terminal would have sent it had the child not had the foreground: a
// calling script's shell, in that group, then gets it too and stops (the
// shells' wait-and-cooperative-exit). If the signal does not kill
// us (ignored by an inherited mask), exit with the shell's status for it.
func reraise(sig syscall.Signal, group bool) {
	signal.Reset(sig)
	if sig == syscall.SIGQUIT || group {
		// Go's own SIGQUIT handler dumps the goroutines and exits 2, and conch must not
		// catch what it sends its group: the kernel's default action, without a core
		// file, is what the caller's shell must see
		_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		_ = defaultAction(sig)
	}
	if group {
		_ = syscall.Kill(0, sig)
	}
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(2 * time.Second)
	os.Exit(128 + int(sig))
}

// defaultAction sets sig's disposition to SIG_DFL in the kernel (rt_sigaction(2)), behind
// the Go runtime's back: only just before conch dies of sig.
func defaultAction(sig syscall.Signal) error {
	var act [4]uint64 // struct kernel_sigaction: handler (SIG_DFL: 0), flags, restorer, mask
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
