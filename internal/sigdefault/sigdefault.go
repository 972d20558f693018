// Package sigdefault makes the processes a test binary starts begin with the default
// disposition of every signal, whatever dispositions the test binary itself inherited, so
// that `make test` under nohup, or from a background job of a script, behaves as from a
// terminal.
//
// The problem: a signal ignored at exec stays ignored in the new program. nohup starts
// `go test` with SIGHUP ignored, and a non-interactive shell starts a background job with
// SIGINT (and SIGQUIT) ignored; go test passes that on to the test binary, and the test
// binary to conch and to the commands it starts. conch rightly keeps an ignored signal
// ignored (D7), so a test that sends it SIGHUP or SIGINT then sees no reaction.
//
// The Go runtime already installs its own handler at start-up for every signal except
// SIGHUP and SIGINT, which it leaves ignored when they were (runtime.sigInstallGoHandler);
// a caught signal is reset to its default by execve, so only those two need doing. Call
// ForChildren from TestMain, before m.Run.
package sigdefault

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals are the signals that ForChildren catches: the ones a Go program keeps ignored
// when it was started with them ignored.
var Signals = []os.Signal{syscall.SIGHUP, syscall.SIGINT}

// Relay is the name of the goroutine's function that ForChildren starts, for
// goleak.IgnoreTopFunction in packages that check for leaked goroutines.
const Relay = "github.com/conch-project/conch/internal/sigdefault.relay"

// ForChildren installs a handler for each of Signals, so that every process the test binary
// starts from then on gets them with their default disposition, and keeps the test binary's
// own behaviour as it was: a signal that was ignored at start is still ignored (dropped on
// receipt), one that was not ends the binary as by default (the handler is removed and the
// signal raised again). It starts one goroutine (Relay), which runs until the process exits; it must
// not be called twice. It does not block.
func ForChildren() {
	ignored := map[os.Signal]bool{}
	for _, s := range Signals {
		ignored[s] = signal.Ignored(s)
	}
	ch := make(chan os.Signal, len(Signals))
	signal.Notify(ch, Signals...)
	go relay(ch, ignored)
}

// relay drops the signals that were ignored and ends the process with the others, as their
// default disposition would. It never returns.
func relay(ch <-chan os.Signal, ignored map[os.Signal]bool) {
	for s := range ch {
		if ignored[s] {
			continue
		}
		signal.Reset(s)
		_ = syscall.Kill(os.Getpid(), s.(syscall.Signal))
	}
}
