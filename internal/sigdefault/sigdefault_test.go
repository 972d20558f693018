package sigdefault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper. "reset" and "keep": print the ignored-signal
// mask (SigIgn of /proc/PID/status) of a child it starts, after calling ForChildren for
// "reset". "hup": call ForChildren, send itself SIGHUP, and exit 0 if that did not end it.
const helperEnv = "SIGDEFAULT_TEST_HELPER"

// signalActs is how long the "hup" helper waits for its SIGHUP to act: a caught signal that
// ends the process does so in microseconds. A negative check: only a wait can show that
// nothing happens.
const signalActs = 500 * time.Millisecond

// runTimeout bounds one helper run.
const runTimeout = time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if mode == "hup" {
			ForChildren()
			_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
			time.Sleep(signalActs)
			os.Exit(0)
		}
		if mode == "reset" {
			ForChildren()
		}
		out, err := exec.Command("sh", "-c", "grep '^SigIgn:' /proc/$$/status").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Print(string(out))
		os.Exit(0)
	}
	// What the tests start must not inherit the dispositions this binary got (nohup make
	// test): TestOwnBehaviourUnchanged needs a helper with SIGHUP at its default.
	ForChildren()
	os.Exit(m.Run())
}

// childIgnores runs the helper with SIGHUP, SIGINT, SIGQUIT, SIGTERM and SIGPIPE ignored (as
// nohup and a background job leave them, and more) and returns which of those its child
// still ignores.
func childIgnores(t *testing.T, mode string) []syscall.Signal {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `trap '' HUP INT QUIT TERM PIPE; exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper (%s): %v", mode, err)
	}
	hex, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "SigIgn:")
	mask, perr := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
	if !ok || perr != nil {
		t.Fatalf("helper (%s) printed %q", mode, out)
	}
	var ign []syscall.Signal
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE} {
		if mask&(1<<(uint(s)-1)) != 0 {
			ign = append(ign, s)
		}
	}
	return ign
}

// Started with the signals ignored, a test binary that called ForChildren starts processes
// that ignore none of them; without it, they inherit SIGHUP and SIGINT ignored (the Go
// runtime resets the others itself).
func TestChildrenGetDefaultDispositions(t *testing.T) {
	if got := childIgnores(t, "reset"); len(got) != 0 {
		t.Errorf("with ForChildren, the child ignores %v", got)
	}
	got := childIgnores(t, "keep")
	if len(got) != 2 || got[0] != syscall.SIGHUP || got[1] != syscall.SIGINT {
		t.Errorf("without ForChildren, the child ignores %v, want [hangup interrupt] (else this test proves nothing)", got)
	}
}

// The test binary's own reaction stays as it was: a signal it ignored at start is still
// ignored, one it did not ignore still ends it.
func TestOwnBehaviourUnchanged(t *testing.T) {
	for _, c := range []struct {
		trap   string
		killed bool
	}{{`trap '' HUP`, false}, {`:`, true}} {
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		cmd := exec.CommandContext(ctx, "sh", "-c", c.trap+`; exec "$0"`, os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=hup")
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		killed := false
		if errors.As(err, &exit) {
			ws, ok := exit.Sys().(syscall.WaitStatus)
			killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGHUP
		}
		if killed != c.killed || (!c.killed && err != nil) {
			t.Errorf("%s, then SIGHUP: %v (want killed by SIGHUP: %v)\n%s", c.trap, err, c.killed, out)
		}
	}
}
