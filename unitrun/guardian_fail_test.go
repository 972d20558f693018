package unitrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests here make Run fall back to stopping the command's tree itself, which stops every
// child of this process that is not a guardian: none of them may run in parallel with tests
// that start helper processes.

// hungGuardianArg makes the test binary play a guardian that starts the command as the real
// one does, but on "stop" keeps stopping itself with SIGSTOP (a SIGCONT only wakes it to stop
// again), as if an operator kept it stopped.
const hungGuardianArg = "__conch-hung-guardian"

func hungGuardianMain() int {
	syscall.CloseOnExec(ctlFD)
	syscall.CloseOnExec(statusFD)
	ctl := bufio.NewReader(os.NewFile(ctlFD, "conch-control"))
	out := eventWriter{enc: json.NewEncoder(os.NewFile(statusFD, "conch-status"))}
	line, err := ctl.ReadString('\n')
	if err != nil {
		return 0
	}
	spec, err := parseSpec([]byte(line))
	if err != nil {
		return 1
	}
	out.send(guardianEvent{Event: evReady})
	for {
		word, err := ctl.ReadString('\n')
		if err != nil {
			return 0
		}
		if word == ctlGo+"\n" {
			break
		}
	}
	pid, err := startCommand(spec)
	if err != nil {
		return 1
	}
	out.send(guardianEvent{Event: evStarted, PID: pid})
	for {
		word, err := ctl.ReadString('\n')
		if err != nil {
			return 0
		}
		if word == ctlStop+"\n" {
			for {
				_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
			}
		}
	}
}

// A guardian stopped with SIGSTOP while the command runs: cancelling ctx still stops the
// command (Run sends the guardian SIGCONT with the stop request) within the usual grace.
func TestRunGuardianStopped(t *testing.T) {
	dir := t.TempDir()
	const killAfter = time.Second
	var gpid atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startRunSh(ctx, t, `echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = killAfter
			s.BeforeStart = func(pid int) error { gpid.Store(int64(pid)); return nil }
		})
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "pid")))
	g := int(gpid.Load())
	if err := unix.Kill(g, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, generousTimeout, "the guardian to be stopped", func() bool {
		p, err := readProcStat(g)
		return err == nil && p.state == 'T'
	})
	cancelled := time.Now()
	cancel()
	o := awaitRun(t, ch, generousTimeout)
	if took := o.at.Sub(cancelled); took > killAfter+guardianStopMargin {
		t.Errorf("Run returned %v after the cancel, want at most %v", took, killAfter+guardianStopMargin)
	}
	if o.err != nil || !o.res.Stopped {
		t.Fatalf("Run = %+v, %v; want stopped, no error", o.res, o.err)
	}
	if alive(child) {
		t.Errorf("command (pid %d) still running after Run returned", child.pid)
	}
}

// A guardian that stays stopped (or hangs) after the stop request: Run kills it after
// KillAfter + guardianStopMargin and kills the command itself, instead of waiting forever.
func TestRunGuardianStaysStopped(t *testing.T) {
	dir := t.TempDir()
	const killAfter = time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startRunSh(ctx, t, `echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = killAfter
			s.Guardian = []string{"/proc/self/exe", hungGuardianArg}
		})
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "pid")))
	cancelled := time.Now()
	cancel()
	o := awaitRun(t, ch, generousTimeout)
	if took, limit := o.at.Sub(cancelled), killAfter+guardianStopMargin+time.Second; took > limit {
		t.Errorf("Run returned %v after the cancel, want at most %v", took, limit)
	}
	if !errors.Is(o.err, ErrGuardian) || !o.res.Started || !o.res.Stopped || o.res.ExitStatus != -1 {
		t.Fatalf("Run = %+v, %v; want started, stopped, status -1 and ErrGuardian", o.res, o.err)
	}
	if alive(child) {
		t.Errorf("command (pid %d) still running after Run returned", child.pid)
	}
}

// SIGKILL of the guardian: the caller, a child subreaper, inherits the command's tree and
// stops it, a setsid grandchild included, before Run returns.
func TestRunGuardianKilledStopsSetsidGrandchild(t *testing.T) {
	dir := t.TempDir()
	var gpid atomic.Int64
	ch := startRunSh(t.Context(), t, `setsid sh -c 'echo $$ > "$DIR/gc.tmp"; mv "$DIR/gc.tmp" "$DIR/gc"; exec sleep 1000' &
echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 1000`,
		func(s *Spec) {
			s.Env = append(s.Env, "DIR="+dir)
			s.stop.KillAfter = time.Second
			s.BeforeStart = func(pid int) error { gpid.Store(int64(pid)); return nil }
		})
	child := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "pid")))
	grandchild := snapshotProc(t, waitPIDFile(t, filepath.Join(dir, "gc")))
	if err := unix.Kill(int(gpid.Load()), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := awaitRun(t, ch, generousTimeout)
	if !errors.Is(o.err, ErrGuardian) || !o.res.Started || o.res.ExitStatus != -1 {
		t.Fatalf("Run = %+v, %v; want started, status -1 and ErrGuardian", o.res, o.err)
	}
	for _, p := range []procEntry{child, grandchild} {
		if alive(p) {
			t.Errorf("process %d still running after Run returned", p.pid)
		}
		if _, err := readProcStat(p.pid); err == nil {
			if now, _ := readProcStat(p.pid); now.start == p.start {
				t.Errorf("process %d left as a zombie: not reaped", p.pid)
			}
		}
	}
}
