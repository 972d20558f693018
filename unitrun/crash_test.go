package unitrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startHelper starts the test binary as a Run caller (see runHelper). The returned channel is
// closed when the helper has exited; *waitErr then holds its wait result. Cleanup kills the
// helper if it still runs and waits for it.
func startHelper(t *testing.T, dir string, cfg helperConfig, setup func(*exec.Cmd) error) (*exec.Cmd, <-chan struct{}, *error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), writeHelperConfig(t, dir, cfg))
	cmd.Stderr = os.Stderr
	if setup == nil {
		setup = func(c *exec.Cmd) error { return c.Start() }
	}
	if err := setup(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	waitErr := new(error)
	go func() {
		defer close(done)
		*waitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, done, waitErr
}

// SIGKILL of the process that called Run: the guardian's parent-death signal makes it stop
// the command and a setsid grandchild, both ignoring SIGTERM, within KillAfter plus a margin
// (D7). The guardian ends too.
func TestRunCallerKilled(t *testing.T) {
	t.Parallel()
	const killAfter = time.Second
	dir := t.TempDir()
	script := `D=` + dir + `
trap "" TERM
setsid sh -c 'trap "" TERM; echo $$ > "$1/gc.tmp"; mv "$1/gc.tmp" "$1/gc"; exec sleep 1000' sh "$D" &
echo $$ > "$D/child.tmp"; mv "$D/child.tmp" "$D/child"
while [ ! -s "$D/gc" ]; do sleep 0.05; done
exec sleep 1000`
	cmd, done, _ := startHelper(t, dir, helperConfig{
		Runs:            []helperRun{{Args: []string{"sh", "-c", script}, KillAfter: killAfter}},
		GuardianPIDFile: filepath.Join(dir, "guardian"),
		ResultFile:      filepath.Join(dir, "results"),
	}, nil)
	guardian := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "guardian")))
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "child")))
	grandchild := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "gc")))
	if guardian.ppid != cmd.Process.Pid || child.ppid != guardian.pid {
		t.Fatalf("process tree: guardian %+v (want parent %d), child %+v", guardian, cmd.Process.Pid, child)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	killed := time.Now()
	waitFor(t, killAfter+3*time.Second, "child, setsid grandchild and guardian to end", func() bool {
		return !alive(child) && !alive(grandchild) && !alive(guardian)
	})
	t.Logf("tree gone %v after SIGKILL of the caller (KillAfter %v)", time.Since(killed), killAfter)
	if results := readHelperResults(t, filepath.Join(dir, "results")); len(results) != 0 {
		t.Fatalf("killed helper reported results: %+v", results)
	}
}
