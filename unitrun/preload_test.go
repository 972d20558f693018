package unitrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stdoutOf returns what the command of a prepareSh spec wrote so far.
func stdoutOf(t *testing.T, spec Spec) string {
	t.Helper()
	b, err := os.ReadFile(spec.Stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A preloaded spec is run by the guardian it was sent to: Run only says go. The
// guardian is used once: a second Preload is refused.
func TestPreloadedRun(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, `echo "late=$LATE"; exit 5`)
	preloaded := p.g.pid
	spec.Env = append(spec.Env, "LATE=1") // the fencing token, known once the key is written
	var ranBy int
	spec.BeforeStart = func(gpid int) error { ranBy = gpid; return nil }
	if err := p.preload(t.Context(), spec); err != nil {
		t.Fatalf("Preload: %v", err)
	}
	if err := p.preload(t.Context(), spec); !errors.Is(err, ErrGuardian) {
		t.Fatalf("second Preload: %v, want ErrGuardian", err)
	}
	if got := stdoutOf(t, spec); got != "" {
		t.Fatalf("the command ran before Run: stdout %q", got)
	}
	res, err := p.run(t.Context(), spec)
	if want := (Result{Started: true, ExitStatus: 5}); err != nil || res != want {
		t.Fatalf("Run = %+v, %v; want %+v", res, err, want)
	}
	if ranBy != preloaded {
		t.Errorf("command started by guardian %d, want the preloaded one, %d", ranBy, preloaded)
	}
	if got := stdoutOf(t, spec); got != "late=1" {
		t.Errorf("stdout %q, want late=1", got)
	}
}

// Run's spec decides, whatever was preloaded: a different one (another fencing token after a
// re-entry) is run by a fresh guardian, and the preloaded guardian is gone.
func TestPreloadedRunOtherSpec(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, `echo "late=$LATE"`)
	old := snapshotProc(t, p.g.pid)
	early := spec
	early.Env = append(spec.Env[:len(spec.Env):len(spec.Env)], "LATE=1")
	if err := p.preload(t.Context(), early); err != nil {
		t.Fatalf("Preload: %v", err)
	}
	spec.Env = append(spec.Env, "LATE=2")
	var ranBy int
	spec.BeforeStart = func(gpid int) error { ranBy = gpid; return nil }
	res, err := p.run(t.Context(), spec)
	if want := (Result{Started: true}); err != nil || res != want {
		t.Fatalf("Run = %+v, %v; want %+v", res, err, want)
	}
	if got := stdoutOf(t, spec); got != "late=2" {
		t.Errorf("stdout %q, want late=2 (Run's spec)", got)
	}
	if ranBy == 0 || ranBy == old.pid {
		t.Errorf("command started by guardian %d, want a fresh one (the preloaded was %d)", ranBy, old.pid)
	}
	if alive(old) {
		t.Errorf("preloaded guardian %d still alive", old.pid)
	}
}

// Close after Preload: the guardian exits without starting the command (it waits for go).
func TestPreloadedClose(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "ran")
	p, spec := prepareSh(t, `: > "`+mark+`"`)
	g := snapshotProc(t, p.g.pid)
	if err := p.preload(t.Context(), spec); err != nil {
		t.Fatalf("Preload: %v", err)
	}
	p.close()
	if alive(g) {
		t.Fatalf("guardian %d alive after Close", g.pid)
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran after Preload and Close (%v)", err)
	}
}

// A preloaded guardian killed while it waits is replaced at Run, as an unloaded one is.
func TestPreloadedGuardianDied(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, "exit 6")
	if err := p.preload(t.Context(), spec); err != nil {
		t.Fatalf("Preload: %v", err)
	}
	if err := p.g.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, generousTimeout, "the guardian to be reaped", p.g.gone)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := p.run(ctx, spec)
	if want := (Result{Started: true, ExitStatus: 6}); err != nil || res != want {
		t.Fatalf("Run = %+v, %v; want %+v", res, err, want)
	}
}

// Preload refuses what Run would refuse, and Run still reports it.
func TestPreloadRefused(t *testing.T) {
	t.Parallel()
	p, spec := prepareSh(t, "exit 0")
	bad := spec
	bad.Path = ""
	if err := p.preload(t.Context(), bad); err == nil {
		t.Fatal("Preload of a spec without a Path: no error")
	}
	other := spec
	other.Stdout = os.Stderr
	if err := p.preload(t.Context(), other); !errors.Is(err, ErrGuardian) {
		t.Fatalf("Preload with other stdio: %v, want ErrGuardian", err)
	}
	res, err := p.run(t.Context(), spec)
	if want := (Result{Started: true}); err != nil || res != want {
		t.Fatalf("Run after refused Preloads = %+v, %v; want %+v", res, err, want)
	}
}
