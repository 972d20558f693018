// Command conch runs commands under cluster-wide limits kept in etcd:
// `conch sema <name> --max N -- <cmd...>` (04_sema.md). This package is the
// CLI only: flags, configuration, signals, the exit-status table and
// logging; the recipe is in package sema and child supervision in unitrun.
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

	"github.com/conch-project/conch/unitrun"
	"github.com/jessevdk/go-flags"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == unitrun.GuardianArg {
		os.Exit(unitrun.GuardianMain())
	}
	// A closed stderr pipe must not kill conch with SIGPIPE in the middle of
	// its queue (its key would linger until expiry): with SIGPIPE caught,
	// writes fail with EPIPE instead. Caught, not ignored, so the child
	// gets the default disposition.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	status, sig := run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	if sig != 0 {
		reraise(sig)
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
// cleaning up (D3).
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) (int, syscall.Signal) {
	before, command, dashdash := splitCommand(args)
	if len(before) > 0 && !strings.HasPrefix(before[0], "-") && before[0] != "sema" && getenv("GO_FLAGS_COMPLETION") == "" {
		hint := "conch has one command, sema"
		if before[0] == "version" {
			hint = "did you mean conch --version?"
		}
		fmt.Fprintf(stderr, "conch: unknown command %q: %s\nTry 'conch sema --help'.\n", before[0], hint)
		return exitUsage, 0
	}
	var g globalOptions
	s := semaCmd{command: command, dashdash: dashdash, stdout: stdout, stderr: stderr, getenv: getenv}
	p := newParser(&g, &s)
	p.SubcommandsOptional = true
	completed := false
	p.CompletionHandler = func(items []flags.Completion) { // GO_FLAGS_COMPLETION (shell completion)
		printCompletions(stdout, items, getenv("GO_FLAGS_COMPLETION") == "verbose")
		completed = true
	}
	_, err := p.ParseArgs(before)
	var ferr *flags.Error
	switch {
	case completed:
		return exitOK, 0
	case errors.As(err, &ferr) && ferr.Type == flags.ErrHelp:
		fmt.Fprintln(stdout, ferr.Message)
		fmt.Fprintln(stdout)
		fmt.Fprint(stdout, semaEpilog)
		return exitOK, 0
	case err != nil:
		fmt.Fprintf(stderr, "conch: %v\nTry 'conch sema --help'.\n", err)
		return exitUsage, 0
	case g.Version:
		fmt.Fprintf(stdout, "conch %s\n", versionString())
		return exitOK, 0
	case g.ManPage:
		// A fresh parser: ParseArgs added help groups to p, which would
		// print twice.
		if err := writeManPage(stdout, newParser(&globalOptions{}, &semaCmd{})); err != nil {
			fmt.Fprintf(stderr, "conch: %v\n", err)
			return exitUnavailable, 0
		}
		return exitOK, 0
	case s.run == nil:
		p.WriteHelp(stderr)
		return exitUsage, 0
	}
	return s.run()
}

// splitCommand splits argv at the first "--": the child's argv after it is
// passed on untouched (STYLE 13).
func splitCommand(args []string) (before, command []string, dashdash bool) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil, false
	}
	return args[:i], args[i+1:], true
}

// reraise dies of sig, so shells report 128+n and systemd sees a clean stop
// (D3). If the signal does not kill us (ignored by an inherited mask), exit
// with the shell's status for it.
func reraise(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(2 * time.Second)
	os.Exit(128 + int(sig))
}
