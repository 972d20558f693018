package unitrun

import (
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/conch-project/conch/internal/syncbuf"
)

// A Run caller in the foreground of a terminal (D5): the command reads a line typed on the
// terminal, and Ctrl-C there kills the command with SIGINT (status 130) while the caller,
// whose group is then in the background, survives and gets the terminal back.
func TestRunTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	var (
		ptmx     io.ReadWriteCloser
		out      syncbuf.Buffer
		readDone = make(chan struct{})
	)
	_, done, waitErr := startHelper(t, dir, helperConfig{
		Runs: []helperRun{
			{Args: []string{"sh", "-c", `echo prompt; read line; echo "got:$line"`}},
			{Args: []string{"sh", "-c", `echo ready; exec sleep 1000`}},
		},
		ResultFile: results,
	}, func(c *exec.Cmd) error {
		// pty.Start makes the helper a session leader with the pty as controlling terminal,
		// in the foreground.
		f, err := pty.Start(c)
		if err != nil {
			return err
		}
		ptmx = f
		go func() {
			defer close(readDone)
			_, _ = io.Copy(&out, f) // ends with EIO once the helper and its children are gone
		}()
		// Registered before startHelper's cleanup, so it runs after the helper was killed:
		// the reader ends once the last holder of the terminal is gone.
		t.Cleanup(func() {
			<-readDone
			_ = f.Close()
		})
		return nil
	})
	waitOutput := func(s string) {
		t.Helper()
		waitFor(t, generousTimeout, "terminal output "+s, func() bool { return out.Contains(s) })
	}

	waitOutput("prompt")
	if _, err := ptmx.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	waitOutput("got:hello")
	waitOutput("ready")
	if _, err := ptmx.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case <-done:
		if *waitErr != nil {
			t.Fatalf("Run caller did not survive Ctrl-C: %v\nterminal:\n%s", *waitErr, out.String())
		}
	case <-time.After(generousTimeout):
		t.Fatalf("Run caller did not finish\nterminal:\n%s", out.String())
	}
	got := readHelperResults(t, results)
	if len(got) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(got), got)
	}
	if r := got[0]; r.Err != "" || r.Result != (Result{Started: true}) || !r.ForegroundBack {
		t.Errorf("reading command: %+v, want exit 0 and the terminal back", r)
	}
	want := Result{Started: true, ExitStatus: 130, Signal: syscall.SIGINT}
	if r := got[1]; r.Err != "" || r.Result != want || !r.ForegroundBack {
		t.Errorf("Ctrl-C'd command: %+v, want %+v and the terminal back", r, want)
	}
}
