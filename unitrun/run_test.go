package unitrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script string
		wantStatus   int
		wantSignal   syscall.Signal
	}{
		{"success", "exit 0", 0, 0},
		{"exit code", "exit 3", 3, 0},
		{"exit code 255", "exit 255", 255, 0},
		{"signal USR1", "kill -USR1 $$", 128 + 10, syscall.SIGUSR1},
		{"signal KILL", "kill -KILL $$", 128 + 9, syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var startedPIDs []int
			res, _, err := runSh(t.Context(), t, tt.script, func(s *Spec) {
				s.Started = func(pid int) { startedPIDs = append(startedPIDs, pid) }
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := Result{Started: true, ExitStatus: tt.wantStatus, Signal: tt.wantSignal}
			if res != want {
				t.Fatalf("Run = %+v, want %+v", res, want)
			}
			if len(startedPIDs) != 1 || startedPIDs[0] <= 0 {
				t.Fatalf("Started called with %v, want one PID", startedPIDs)
			}
		})
	}
}

func TestRunExecFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	badInterp := filepath.Join(dir, "bad-interpreter")
	if err := os.WriteFile(plain, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badInterp, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, dir string
		wantErr         error
	}{
		{"missing", filepath.Join(dir, "missing"), "", ErrNotFound},
		{"no execute permission", plain, "", ErrNotExecutable},
		{"directory", dir, "", ErrNotExecutable},
		{"bad interpreter", badInterp, "", ErrNotExecutable},
		{"bad working directory", "/bin/true", filepath.Join(dir, "missing-dir"), ErrNotExecutable},
		{"bad working directory, relative path", "./tool", filepath.Join(dir, "missing-dir"), ErrNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			called := false
			res, err := run(t.Context(), Spec{stop: testStop, Path: tt.path, Dir: tt.dir, Env: []string{},
				Started: func(int) { called = true }})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
			}
			if res.Started || called || res.ExitStatus > 0 {
				t.Fatalf("Run = %+v (Started hook called: %v), want not started, without a status",
					res, called)
			}
		})
	}
}

// The command gets exactly Spec.Env, Spec.Dir and the three stdio descriptors (D5): nothing of
// the guardian's pipes or environment, nor descriptors the caller inherited without
// close-on-exec.
func TestRunEnvironmentDirAndDescriptors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := `env | sort; echo "pwd=$(pwd)"; for fd in 3 4 5 6 7 8 9 10 11 12; do ` +
		`[ -e /proc/$$/fd/$fd ] && echo "open fd $fd -> $(readlink /proc/$$/fd/$fd)"; done; ` +
		`read x || echo stdin-eof`
	res, out, err := runSh(t.Context(), t, script, func(s *Spec) {
		s.Env = []string{testPATH, "FOO=bar"}
		s.Dir = dir
	})
	if err != nil || res.ExitStatus != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var env []string
	for _, l := range lines {
		if strings.Contains(l, "=") && !strings.HasPrefix(l, "pwd=") && !strings.HasPrefix(l, "PWD=") {
			env = append(env, l)
		}
	}
	if strings.Join(env, "\n") != "FOO=bar\n"+testPATH {
		t.Errorf("command environment = %q, want only FOO and PATH (sh adds PWD)", env)
	}
	if !strings.Contains(out, "pwd="+dir+"\n") {
		t.Errorf("command did not run in %s:\n%s", dir, out)
	}
	if strings.Contains(out, "open fd") {
		t.Errorf("command inherited descriptors beyond stdio:\n%s", out)
	}
	if !strings.Contains(out, "stdin-eof") {
		t.Errorf("nil Stdin is not /dev/null:\n%s", out)
	}
}

// BeforeStart runs while the guardian is alive and before the command's first instruction;
// the command is then the guardian's child.
func TestRunBeforeStart(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	var hookErr error
	gpid := 0
	res, _, err := runSh(t.Context(), t, `echo $PPID > "$MARKER"`, func(s *Spec) {
		s.Env = append(s.Env, "MARKER="+marker)
		s.BeforeStart = func(pid int) error {
			gpid = pid
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				hookErr = errors.New("marker exists before the command was started")
			} else if !pidExists(pid) {
				hookErr = errors.New("guardian not running during BeforeStart")
			}
			return nil
		}
	})
	if err != nil || res.ExitStatus != 0 || !res.Started {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if ppid, _ := strconv.Atoi(strings.TrimSpace(string(data))); ppid != gpid || gpid == 0 {
		t.Fatalf("command's parent = %s, want the guardian %d", data, gpid)
	}
	if pidExists(gpid) {
		t.Fatalf("guardian %d still running after Run returned", gpid)
	}
}

// A BeforeStart error means the command never runs.
func TestRunBeforeStartError(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	gpid := 0
	res, _, err := runSh(t.Context(), t, `echo ran > "$MARKER"`, func(s *Spec) {
		s.Env = append(s.Env, "MARKER="+marker)
		s.BeforeStart = func(pid int) error { gpid = pid; return errBoom }
	})
	if !errors.Is(err, errBoom) || res.Started {
		t.Fatalf("Run = %+v, %v; want not started, error wrapping %v", res, err, errBoom)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran despite the BeforeStart error (marker: %v)", err)
	}
	if gpid == 0 || pidExists(gpid) {
		t.Fatalf("guardian %d still running after Run returned", gpid)
	}
}

// A context that ended before the start means no start at all, with the cause in the error.
func TestRunContextEndedBeforeStart(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errBoom)
	res, _, err := runSh(ctx, t, `echo ran > "$MARKER"`, func(s *Spec) {
		s.Env = append(s.Env, "MARKER="+marker)
	})
	if !errors.Is(err, errBoom) || res.Started {
		t.Fatalf("Run = %+v, %v; want not started, error wrapping the cause", res, err)
	}

	// Ended during BeforeStart: the same.
	ctx, cancel = context.WithCancelCause(t.Context())
	res, _, err = runSh(ctx, t, `echo ran > "$MARKER"`, func(s *Spec) {
		s.Env = append(s.Env, "MARKER="+marker)
		s.BeforeStart = func(int) error { cancel(errBoom); return nil }
	})
	if !errors.Is(err, errBoom) || res.Started {
		t.Fatalf("Run = %+v, %v; want not started, error wrapping the cause", res, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran although ctx had ended (marker: %v)", err)
	}
}
