package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/syncbuf"
	"github.com/conch-project/conch/sema/schema"
	"github.com/creack/pty"
)

// ptyRun starts conch with a new pseudo-terminal as its controlling terminal
// and stdio, as from an interactive shell. It returns the master side and a
// function that reads everything written so far.
func (e *env) ptyRun(args ...string) (*exec.Cmd, io.Writer, func() string) {
	e.t.Helper()
	return e.ptyStart(exec.Command(conchBin, args...))
}

// ptyStart starts cmd with the env's variables on a new pseudo-terminal (its controlling
// terminal and stdio). It returns cmd, the master side and a function that reads everything
// written so far; Cleanup kills cmd and closes the master.
func (e *env) ptyStart(cmd *exec.Cmd) (*exec.Cmd, io.Writer, func() string) {
	e.t.Helper()
	cmd.Env = e.vars
	master, err := pty.Start(cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	var buf syncbuf.Buffer
	go func() { _, _ = io.Copy(&buf, master) }() // ends when the pty closes
	e.t.Cleanup(func() { cmd.Process.Kill(); master.Close() })
	return cmd, master, buf.String
}

func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("conch under a pty did not exit")
	}
	return cmd.ProcessState.ExitCode()
}

// D5: a child reading the terminal works (its process group is the
// terminal's foreground group while it runs).
func TestTerminalChildReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd, master, out := e.ptyRun("sema", "tty", "--max", "1", "--", "sh", "-c", "echo ready; read line; echo got:$line")
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
	io.WriteString(master, "hello\n")
	if code := exitOf(t, cmd); code != 0 {
		t.Fatalf("exit %d, output %q", code, out())
	}
	waitFor(t, "child's echo", func() bool { return strings.Contains(out(), "got:hello") })
}

// D5: Ctrl-C reaches the child, which dies of SIGINT; conch releases the slot and dies of
// SIGINT too (the caller's shell then stops, see TestTerminalCtrlCStopsScript).
func TestTerminalCtrlC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd, master, out := e.ptyRun("sema", "ctrlc", "--max", "1", "--", "sh", "-c", "echo ready; exec sleep 60")
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
	io.WriteString(master, "\x03")
	exitOf(t, cmd)
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("conch after Ctrl-C: %v, want killed by SIGINT; output %q", cmd.ProcessState, out())
	}
	if n := e.keys(schema.NamePrefix("ctrlc")); n != 0 {
		t.Fatalf("%d keys left after Ctrl-C", n)
	}
}

// Ctrl-\ is the same with SIGQUIT: conch dies of it, without a core file or Go's goroutine
// dump.
func TestTerminalCtrlBackslash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd, master, out := e.ptyRun("sema", "ctrlq", "--max", "1", "--", "sh", "-c", "echo ready; exec sleep 60")
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
	io.WriteString(master, "\x1c")
	exitOf(t, cmd)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGQUIT || ws.CoreDump() || strings.Contains(out(), "goroutine") {
		t.Fatalf("conch after Ctrl-\\: %v (core %v), want killed by SIGQUIT; output %q", cmd.ProcessState, ws.CoreDump(), out())
	}
	if n := e.keys(schema.NamePrefix("ctrlq")); n != 0 {
		t.Fatalf("%d keys left after Ctrl-\\", n)
	}
}

// Ctrl-C stops the calling script. The child has the terminal's foreground (D5),
// so only it gets SIGINT; once it died of it, conch releases and then dies of SIGINT itself,
// so bash, waiting for conch, stops the script (the shells' wait-and-cooperative-exit) as it
// does for flock(1) and timeout(1): neither the loop's next round nor the next line runs.
func TestTerminalCtrlCStopsScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := "#!/bin/bash\nfor i in 1 2; do\n  " + conchBin + " sema deploy --max 1 -- sh -c \"echo ready \\$0; exec sleep 60\" $i\ndone\necho \"step 2 ran anyway ($?)\"\n"
	cmd, master, out := e.scriptInPty(t, "d.sh", body)
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready 1") })
	io.WriteString(master, "\x03")
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("bash did not exit after Ctrl-C; output %q", out())
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGINT || strings.Contains(out(), "ready 2") || strings.Contains(out(), "step 2") {
		t.Fatalf("bash: %v, output %q; want it killed by SIGINT in the loop's first round", cmd.ProcessState, out())
	}
	if n := e.keys(schema.NamePrefix("deploy")); n != 0 {
		t.Fatalf("%d keys left after Ctrl-C", n)
	}
}

// README's claim for Ctrl-\: conch releases and dies of SIGQUIT, but bash, unlike for SIGINT,
// goes on with the script's next command (status 131, bash's own rule); `set -e` stops it.
func TestTerminalCtrlBackslashScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, tc := range []struct {
		opts string
		ran  bool // whether the line after conch runs
	}{{"", true}, {"set -e\n", false}} {
		name := "quit" + string(rune('a'+i))
		body := "#!/bin/bash\n" + tc.opts + conchBin + " sema " + name + " --max 1 -- sh -c 'echo ready; exec sleep 60'\necho \"after conch: $?\"\n"
		cmd, master, out := e.scriptInPty(t, name+".sh", body)
		waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
		io.WriteString(master, "\x1c")
		// bash's status tells whether the line ran (echo's 0) or not (conch's 131, set -e);
		// the line itself is polled for: the pty's output may still be on its way when bash
		// has exited
		code := exitOf(t, cmd)
		switch {
		case tc.ran && code == 0:
			waitFor(t, "the line after conch", func() bool { return strings.Contains(out(), "after conch: 131") })
		case tc.ran || code != 131:
			t.Errorf("%q: bash %v, output %q; want the next line run: %v", tc.opts, cmd.ProcessState, out(), tc.ran)
		}
		if n := e.keys(schema.NamePrefix(name)); n != 0 {
			t.Errorf("%d keys left after Ctrl-\\", n)
		}
	}
}

// scriptInPty writes body as the executable script name in the test's directory and starts
// it with bash on a new pty (ptyStart).
func (e *env) scriptInPty(t *testing.T, name, body string) (*exec.Cmd, io.Writer, func() string) {
	t.Helper()
	script := e.path(name)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return e.ptyStart(exec.Command("bash", script))
}
