package unitrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prepareSh prepares a guardian for runSh-like specs (stdout to a file) and closes it at the
// end of the test.
func prepareSh(t *testing.T, script string) (*prepared, Spec) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	path, err := Resolve("sh")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{stop: testStop, Path: path, Args: []string{"sh", "-c", script}, Env: []string{testPATH}, Stdout: out, Stderr: os.Stderr}
	p, err := prepare(spec)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Cleanup(p.close)
	return p, spec
}

// A prepared guardian waits, then runs the command it is given later; Run returns its status
// and may not be called twice; Close joins the guardian.
func TestPreparedRun(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, "exit 3")
	guardian := snapshotProc(t, p.g.pid)
	waitAwaitingSpec(t, guardian.pid)
	spec.Env = append(spec.Env, "LATE=1") // known only now, e.g. CONCH_REV (D5)
	res, err := p.run(t.Context(), spec)
	if want := (Result{Started: true, ExitStatus: 3}); err != nil || res != want {
		t.Fatalf("Run = %+v, %v; want %+v", res, err, want)
	}
	if _, err := p.run(t.Context(), spec); !errors.Is(err, ErrGuardian) {
		t.Fatalf("second Run: %v, want ErrGuardian", err)
	}
	p.close()
	if alive(guardian) {
		t.Fatalf("guardian %d alive after Close", guardian.pid)
	}
	p.close()
}

// Close before Run ends the guardian at once: nothing was started, nothing is left.
func TestPreparedClose(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, "exit 0")
	guardian := snapshotProc(t, p.g.pid)
	p.close()
	if alive(guardian) {
		t.Fatalf("guardian %d alive after Close", guardian.pid)
	}
	if _, err := p.run(t.Context(), spec); !errors.Is(err, ErrGuardian) {
		t.Fatalf("Run after Close: %v, want ErrGuardian", err)
	}
}

// What Run cannot honour with the prepared guardian, or a ctx already ended, means the command
// never starts, and the guardian is gone.
func TestPreparedRunRefused(t *testing.T) {
	t.Parallel()
	ended, cancel := context.WithCancelCause(t.Context())
	cancel(errBoom)
	tests := []struct {
		name    string
		ctx     context.Context
		mod     func(*Spec)
		wantErr error
	}{
		{"other stdout", t.Context(), func(s *Spec) { s.Stdout = os.Stderr }, ErrGuardian},
		{"other guardian", t.Context(), func(s *Spec) { s.Guardian = []string{"/proc/self/exe", GuardianArg, "x"} }, ErrGuardian},
		{"ctx ended", ended, nil, errBoom},
		{"empty path", t.Context(), func(s *Spec) { s.Path = "" }, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p, spec := prepareSh(t, `touch "$DIR/ran"`)
			spec.Env = append(spec.Env, "DIR="+dir)
			guardian := snapshotProc(t, p.g.pid)
			if tt.mod != nil {
				tt.mod(&spec)
			}
			res, err := p.run(tt.ctx, spec)
			if !errors.Is(err, tt.wantErr) || res.Started {
				t.Fatalf("Run = %+v, %v; want not started, %v", res, err, tt.wantErr)
			}
			p.close()
			if alive(guardian) {
				t.Fatalf("guardian %d alive after Close", guardian.pid)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
				t.Fatal("the command ran")
			}
		})
	}
}

// A prepared guardian killed while it waited (OOM killer, an operator): Run takes a fresh one
// and the command runs.
func TestPreparedGuardianDied(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, "exit 4")
	dead := p.g.pid
	if err := p.g.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, generousTimeout, "the guardian to be reaped", p.g.gone)
	var started int
	spec.BeforeStart = func(gpid int) error { started = gpid; return nil }
	res, err := p.run(t.Context(), spec)
	if want := (Result{Started: true, ExitStatus: 4}); err != nil || res != want {
		t.Fatalf("Run = %+v, %v; want %+v", res, err, want)
	}
	if started == 0 || started == dead {
		t.Fatalf("command started by guardian %d, want a fresh one (the killed one was %d)", started, dead)
	}
}

// SIGKILL of the caller while its prepared guardian waits for a command: the guardian exits
// at once (D7: nothing may outlive conch).
func TestPreparedCallerKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, done, _ := startHelper(t, dir, helperConfig{
		PrepareOnly:     true,
		GuardianPIDFile: filepath.Join(dir, "guardian"),
	}, nil)
	guardian := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "guardian")))
	if guardian.ppid != cmd.Process.Pid {
		t.Fatalf("guardian %+v: want parent %d", guardian, cmd.Process.Pid)
	}
	waitAwaitingSpec(t, guardian.pid)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	killed := time.Now()
	waitFor(t, 3*time.Second, "the prepared guardian to end", func() bool { return !alive(guardian) })
	t.Logf("prepared guardian gone %v after SIGKILL of the caller", time.Since(killed))
}

// waitAwaitingSpec waits until the guardian pid has done its start-up and waits for its spec:
// one of its threads is blocked reading a pipe (its control pipe; wchan "pipe_read", or
// "anon_pipe_read" on newer kernels).
func waitAwaitingSpec(t testing.TB, pid int) {
	t.Helper()
	waitFor(t, generousTimeout, "the prepared guardian to wait on its control pipe", func() bool {
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/wchan")
		for _, f := range tasks {
			if w, err := os.ReadFile(f); err == nil && strings.HasSuffix(string(w), "pipe_read") {
				return true
			}
		}
		return false
	})
}

// BenchmarkPreparedRun measures prepared.run of /bin/true with a guardian that has done its
// start-up: "start" is from the call to the Started callback (spec, ready, go, the guardian's
// fork and exec; with "preloaded", Preload sent the spec before the clock started, so only go,
// the fork and exec remain), ns/op from the call to Run's return (also the exit and the
// teardown). Compare the two sub-benchmarks in one run (-benchtime=200x).
func BenchmarkPreparedRun(b *testing.B) {
	path, err := Resolve("true")
	if err != nil {
		b.Fatal(err)
	}
	for _, preload := range []bool{false, true} {
		b.Run(map[bool]string{false: "spec-at-run", true: "preloaded"}[preload], func(b *testing.B) {
			var start time.Duration
			for b.Loop() {
				b.StopTimer()
				p, err := prepare(Spec{})
				if err != nil {
					b.Fatal(err)
				}
				var t0 time.Time
				spec := Spec{stop: testStop, Path: path, Env: []string{testPATH}, Started: func(int) { start += time.Since(t0) }}
				if preload {
					if err := p.preload(context.Background(), spec); err != nil {
						b.Fatal(err)
					}
				}
				waitAwaitingSpec(b, p.g.pid)
				b.StartTimer()
				t0 = time.Now()
				res, err := p.run(context.Background(), spec)
				b.StopTimer()
				p.close()
				if err != nil || res.ExitStatus != 0 {
					b.Fatalf("Run = %+v, %v", res, err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(start.Microseconds())/float64(b.N)/1000, "ms-to-start/op")
		})
	}
}
