package unitrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type runOutcome struct {
	res Result
	err error
	at  time.Time // when Run returned
}

// startRunSh runs script in the background; the channel gets Run's outcome.
func startRunSh(ctx context.Context, t *testing.T, script string, mod func(*Spec)) <-chan runOutcome {
	t.Helper()
	path, err := Resolve("sh")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{stop: testStop, Path: path, Args: []string{"sh", "-c", script}, Env: []string{testPATH}}
	if mod != nil {
		mod(&spec)
	}
	ch := make(chan runOutcome, 1)
	go func() {
		res, err := run(ctx, spec)
		ch <- runOutcome{res: res, err: err, at: time.Now()}
	}()
	return ch
}

// awaitRun waits for the outcome of startRunSh.
func awaitRun(t *testing.T, ch <-chan runOutcome, timeout time.Duration) runOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %v", timeout)
		return runOutcome{}
	}
}

// A command that ignores SIGTERM survives the grace period and is SIGKILLed after it.
func TestRunCancelEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	const killAfter = 2 * time.Second
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startRunSh(ctx, t, `trap "" TERM; echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = killAfter
		})
	child := snapshotProc(t, waitPIDFile(t, pidFile))
	cancelled := time.Now()
	cancel()

	// Still alive during (most of) the grace period: watched, not slept through.
	for time.Since(cancelled) < killAfter*8/10 {
		if !alive(child) {
			t.Fatalf("child killed %v after the stop, before KillAfter=%v", time.Since(cancelled), killAfter)
		}
		time.Sleep(pollInterval)
	}
	o := awaitRun(t, ch, killAfter+generousTimeout)
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if took := o.at.Sub(cancelled); took < killAfter {
		t.Fatalf("Run returned %v after cancel, before KillAfter=%v", took, killAfter)
	}
	want := Result{Started: true, ExitStatus: 128 + 9, Signal: syscall.SIGKILL, Stopped: true}
	if o.res != want {
		t.Fatalf("Run = %+v, want %+v", o.res, want)
	}
	if alive(child) {
		t.Fatalf("child %d still alive after Run returned", child.pid)
	}
}

// A command that obeys the stop signal ends at once, with that signal.
func TestRunCancelStopSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startRunSh(ctx, t, `echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.StopSignal = syscall.SIGUSR2
			s.stop.KillAfter = time.Minute
		})
	waitPIDFile(t, filepath.Join(dir, "pid"))
	cancel()
	o := awaitRun(t, ch, generousTimeout)
	want := Result{Started: true, ExitStatus: 128 + int(syscall.SIGUSR2), Signal: syscall.SIGUSR2, Stopped: true}
	if o.err != nil || o.res != want {
		t.Fatalf("Run = %+v, %v; want %+v", o.res, o.err, want)
	}
}

func TestRunRuntimeMax(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res, _, err := runSh(t.Context(), t, `exec sleep 1000`, func(s *Spec) {
		s.stop.RuntimeMax = 300 * time.Millisecond
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := Result{Started: true, ExitStatus: 128 + 15, Signal: syscall.SIGTERM, RuntimeExceeded: true}
	if res != want {
		t.Fatalf("Run = %+v, want %+v", res, want)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("stopped after %v, before RuntimeMax", took)
	}
}

// What the command leaves running when it exits on its own (a background job in its group, a
// double-forked orphan, a setsid grandchild that ignores SIGTERM) is stopped before Run
// returns, and the command's own status is kept (D7).
func TestRunStopsLeftovers(t *testing.T) {
	t.Parallel()
	const killAfter = 500 * time.Millisecond
	dir := t.TempDir()
	script := `
sleep 1000 & echo $! > "$DIR/bg"
sh -c 'sleep 1000 & echo $! > "$DIR/df"'
setsid sh -c 'trap "" TERM; echo $$ > "$DIR/gc.tmp"; mv "$DIR/gc.tmp" "$DIR/gc"; exec sleep 1000' &
while [ ! -s "$DIR/gc" ] || [ ! -s "$DIR/df" ]; do sleep 0.05; done
exit 7`
	start := time.Now()
	res, _, err := runSh(t.Context(), t, script, func(s *Spec) {
		s.Env = append(s.Env, "DIR="+dir)
		s.stop.KillAfter = killAfter
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := (Result{Started: true, ExitStatus: 7}); res != want {
		t.Fatalf("Run = %+v, want %+v", res, want)
	}
	for _, name := range []string{"bg", "df", "gc"} {
		pid := waitPIDFile(t, filepath.Join(dir, name))
		if pidExists(pid) {
			t.Errorf("leftover %s (pid %d) still running after Run returned", name, pid)
		}
	}
	if took < killAfter {
		t.Errorf("Run took %v: the SIGTERM-proof grandchild cannot have been given its %v grace", took, killAfter)
	}
}

// If the guardian dies, Run stops the command's process group itself and says so. Not
// parallel: Run's fallback stops every child of this process that is not a guardian, which
// would include other tests' helper processes.
func TestRunGuardianDies(t *testing.T) {
	dir := t.TempDir()
	var gpid atomic.Int64
	ch := startRunSh(t.Context(), t, `echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = time.Second
			s.BeforeStart = func(pid int) error { gpid.Store(int64(pid)); return nil }
		})
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "pid")))
	if g := int(gpid.Load()); g == 0 || child.ppid != g {
		t.Fatalf("command's parent is %d, want the guardian %d", child.ppid, g)
	}
	if err := unix.Kill(int(gpid.Load()), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := awaitRun(t, ch, generousTimeout)
	if !errors.Is(o.err, ErrGuardian) || !o.res.Started || o.res.ExitStatus != -1 {
		t.Fatalf("Run = %+v, %v; want started, status -1 and ErrGuardian", o.res, o.err)
	}
	waitFor(t, generousTimeout, "the command to end", func() bool { return !alive(child) })
}

// D7b (1): a context whose cause wraps ErrNoGrace stops the command with SIGKILL at once,
// however long KillAfter is and though the command ignores SIGTERM; also when a stop with the
// grace is already under way (here the RuntimeMax of the stop timing asked first).
func TestRunNoGraceKillsAtOnce(t *testing.T) {
	t.Parallel()
	for _, graceFirst := range []bool{false, true} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancelCause(t.Context())
		// the command notes each SIGTERM and goes on: the stop with the grace is under way
		// once the note is there
		ch := startRunSh(ctx, t, `trap 'echo > "$DIR/term"' TERM; echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; while :; do sleep 0.05; done`,
			func(s *Spec) {
				s.Env = append(s.Env, "DIR="+dir)
				s.stop.KillAfter = time.Minute
				if graceFirst {
					s.stop.RuntimeMax = 100 * time.Millisecond
				}
			})
		waitPIDFile(t, filepath.Join(dir, "pid"))
		if graceFirst {
			waitFor(t, generousTimeout, "RuntimeMax's stop signal", func() bool {
				_, err := os.Stat(filepath.Join(dir, "term"))
				return err == nil
			})
		}
		cancel(fmt.Errorf("late: %w", ErrNoGrace))
		o := awaitRun(t, ch, generousTimeout)
		if o.err != nil || o.res.Signal != syscall.SIGKILL || !o.res.Started {
			t.Fatalf("graceFirst %v: Run = %+v, %v; want the command SIGKILLed", graceFirst, o.res, o.err)
		}
	}
}

// D7b (2): a caller that gives Run a Deadline and then goes silent (no newer value, no
// cancellation) has the command stopped by the guardian on its own: the stop signal at the
// fence (plus guardianFenceLag), SIGKILL by the deadline less guardianKillMargin however long
// KillAfter is, and Result.Fenced says so.
func TestGuardianFencesOnItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dl := NewDeadline()
	dl.Set(time.Now().Add(time.Hour), time.Now().Add(time.Hour)) // far off until the command runs: a slow start is no fence
	ch := startRunSh(t.Context(), t, `trap "" TERM; echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = time.Minute
			s.Deadline = dl
		})
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "pid")))
	now := time.Now()
	deadline := now.Add(4 * time.Second)            // SIGKILL due 3 s from now: 1 s to spare under load
	dl.Set(now.Add(300*time.Millisecond), deadline) // then the caller stops renewing
	for alive(child) && time.Since(now) < generousTimeout {
		time.Sleep(pollInterval)
	}
	gone := time.Now()
	// (Run itself may return later: it joins the guardian, whose exit the race detector delays.)
	o := awaitRun(t, ch, generousTimeout)
	t.Logf("the command was gone %v before the deadline", deadline.Sub(gone).Round(time.Millisecond))
	if o.err != nil || !o.res.Fenced || o.res.Signal != syscall.SIGKILL || o.res.Stopped {
		t.Fatalf("Run = %+v, %v; want the command SIGKILLed by the guardian's own fence", o.res, o.err)
	}
	if !gone.Before(deadline) {
		t.Fatalf("the command was gone %v after Set, the deadline was %v", gone.Sub(now), deadline.Sub(now))
	}
}

// D7b (2): the guardian's copy of the deadline moves with each Set while the command runs: a
// caller that keeps renewing is never fenced by it.
func TestGuardianDeadlineFollowsRenewals(t *testing.T) {
	t.Parallel()
	dl := NewDeadline()
	renew := func() { now := time.Now(); dl.Set(now.Add(200*time.Millisecond), now.Add(1500*time.Millisecond)) }
	renew()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startRunSh(ctx, t, `sleep 2`, func(s *Spec) { s.Deadline = dl })
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		renew()
	}
	o := awaitRun(t, ch, generousTimeout)
	if o.err != nil || o.res.Fenced || o.res.ExitStatus != 0 {
		t.Fatalf("Run = %+v, %v; want the command's own exit 0, never fenced", o.res, o.err)
	}
}
