package main

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/syncbuf"
	"github.com/conch-project/conch/sema"
	"github.com/creack/pty"
)

// ptyRun starts conch with a new pseudo-terminal as its controlling terminal
// and stdio, as from an interactive shell. It returns the master side and a
// function that reads everything written so far.
func (e *env) ptyRun(args ...string) (*exec.Cmd, io.Writer, func() string) {
	e.t.Helper()
	cmd := exec.Command(conchBin, args...)
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
	e := newEnv(t)
	cmd, master, out := e.ptyRun("sema", "tty", "--max", "1", "--", "sh", "-c", "echo ready; read line; echo got:$line")
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
	io.WriteString(master, "hello\n")
	if code := exitOf(t, cmd); code != 0 {
		t.Fatalf("exit %d, output %q", code, out())
	}
	waitFor(t, "child's echo", func() bool { return strings.Contains(out(), "got:hello") })
}

// D5: Ctrl-C reaches the child, which dies of SIGINT; conch exits 130 and
// releases the slot.
func TestTerminalCtrlC(t *testing.T) {
	e := newEnv(t)
	cmd, master, out := e.ptyRun("sema", "ctrlc", "--max", "1", "--", "sh", "-c", "echo ready; exec sleep 60")
	waitFor(t, "child ready", func() bool { return strings.Contains(out(), "ready") })
	io.WriteString(master, "\x03")
	if code := exitOf(t, cmd); code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130; output %q", code, out())
	}
	if n := e.keys(sema.NamePrefix("ctrlc")); n != 0 {
		t.Fatalf("%d keys left after Ctrl-C", n)
	}
}
