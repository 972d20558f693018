package unitrun

// This file runs in the caller's process (conch): starting the guardian process (D7) and
// conch's handle on it, the caller's end of the guardian pipe.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// subreaperOnce makes the process calling prepare or Run a child subreaper (D7) once, before
// its first guardian starts: when a guardian dies (SIGKILL, OOM killer), the command and its
// descendants, setsid ones included, are reparented to the caller instead of PID 1, so that
// Run's fallback (stopOrphans) can still find, stop and reap them. The process starts no
// other children of its own in conch; those it does start are waited for by PID (os/exec),
// never by wait4(-1), so being a subreaper collects nothing that is not ours to collect.
var subreaperOnce sync.Once

// liveGuardians holds the PIDs of the guardians this process has started and not yet reaped:
// stopOrphans leaves them and their trees alone (concurrent Runs each have one).
var liveGuardians = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// guardianSet returns a copy of liveGuardians.
func guardianSet() map[int]bool {
	liveGuardians.Lock()
	defer liveGuardians.Unlock()
	m := make(map[int]bool, len(liveGuardians.pids))
	for pid := range liveGuardians.pids {
		m[pid] = true
	}
	return m
}

// guardianProc is Run's handle on a running guardian.
type guardianProc struct {
	pid      int
	proc     *os.Process
	began    time.Time            // when it was started: the hello deadline counts from here
	ctl      *os.File             // write end of the control pipe
	events   <-chan guardianEvent // closed when the guardian exited (status pipe EOF)
	done     <-chan struct{}      // closed once the guardian has exited and been reaped
	waitErr  *error               // the wait result, set before done is closed
	specSent bool                 // the guardian may have started something: no SIGKILL
	closed   bool
}

// startGuardian starts the guardian (D7) with the control and status pipes; the guardian then
// waits for its spec (sendSpec). It uses spec's Guardian, Stdin, Stdout and Stderr only. The
// guardian is forked by a goroutine locked to its OS thread that stays in wait4 until the
// guardian exits: Linux delivers the parent-death signal (SIGTERM) when the forking thread
// ends, so that thread must outlive the guardian, and it does unless the whole process dies,
// which is exactly when the signal should fire. That goroutine and the status reader both end
// when the guardian exits; close waits for them.
func startGuardian(spec Spec) (*guardianProc, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot create control pipe: %v", ErrGuardian, err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		_, _ = ctlR.Close(), ctlW.Close()
		return nil, fmt.Errorf("%w: cannot create status pipe: %v", ErrGuardian, err)
	}
	cmd := &exec.Cmd{
		Path:        spec.Guardian[0],
		Args:        spec.Guardian,
		Env:         []string{}, // nothing the command could inherit (D7)
		ExtraFiles:  []*os.File{ctlR, stW},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	}
	// Assigned only when set: a nil *os.File in an io.Reader would not be a nil interface.
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
	}
	if spec.Stderr != nil {
		cmd.Stderr = spec.Stderr
	}

	subreaperOnce.Do(func() {
		// Failure (Linux < 3.4) only loses the reach over descendants of a dead guardian.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	began := time.Now()
	done, waitErr, err := startLocked(cmd)
	_, _ = ctlR.Close(), stW.Close() // the guardian has its copies
	if err != nil {
		_, _ = ctlW.Close(), stR.Close()
		return nil, fmt.Errorf("%w: cannot start %s: %v", ErrGuardian, spec.Guardian[0], err)
	}
	return &guardianProc{pid: cmd.Process.Pid, proc: cmd.Process, began: began, ctl: ctlW, events: readEvents(stR), done: done, waitErr: waitErr}, nil
}

// startLocked starts cmd from a goroutine locked to its OS thread that stays in wait4 until
// the process exits (the parent-death signal is tied to that thread, see startGuardian) and
// registers it in liveGuardians meanwhile. It returns once cmd has started, or failed to; done
// is closed once the process has exited, been reaped and unregistered, with its wait result in
// *waitErr.
func startLocked(cmd *exec.Cmd) (done <-chan struct{}, waitErr *error, err error) {
	started := make(chan error, 1)
	exited := make(chan struct{})
	waitErr = new(error)
	go func() {
		// Never unlocked: the goroutine ends locked, so the runtime retires the thread
		// instead of reusing it.
		runtime.LockOSThread()
		liveGuardians.Lock() // so that no stopOrphans sees the new guardian unregistered
		if err := cmd.Start(); err != nil {
			liveGuardians.Unlock()
			started <- err
			return
		}
		liveGuardians.pids[cmd.Process.Pid] = true
		liveGuardians.Unlock()
		started <- nil
		*waitErr = cmd.Wait()
		liveGuardians.Lock()
		delete(liveGuardians.pids, cmd.Process.Pid)
		liveGuardians.Unlock()
		close(exited)
	}()
	return exited, waitErr, <-started
}

// gone reports whether the guardian has exited already.
func (g *guardianProc) gone() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// specLine is the control-pipe line that gives the guardian the command's spec, whether its
// process group is to get the terminal (D5), and in scope mode the scope it is to live in (D8),
// without the newline. Equal lines mean the guardian would start the same command the same way
// (prepared.preload relies on it).
func specLine(spec Spec, foreground bool, scope *wireScope) ([]byte, error) {
	line, err := json.Marshal(wireSpec{
		Path:       spec.Path,
		Args:       spec.Args,
		Env:        spec.Env,
		Dir:        spec.Dir,
		StopSignal: int(spec.stop.StopSignal),
		KillAfter:  spec.stop.KillAfter,
		Foreground: foreground,
		Scope:      scope,
		Build:      thisBuild(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: cannot encode the spec: %v", ErrGuardian, err)
	}
	return line, nil
}

// sendSpec sends the guardian a spec line (specLine). An error wraps ErrGuardian; the guardian
// must then be closed.
func (g *guardianProc) sendSpec(line []byte) error {
	g.specSent = true
	if _, err := g.ctl.Write(append(line[:len(line):len(line)], '\n')); err != nil {
		return fmt.Errorf("%w: cannot send the spec: %v", ErrGuardian, err)
	}
	return nil
}

// send writes one control word. An error means the guardian is gone, which Run learns from
// the status pipe's EOF, so callers may ignore it.
func (g *guardianProc) send(word string) error {
	_, err := g.ctl.Write([]byte(word + "\n"))
	return err
}

// close tells the guardian to abort if it has not started the command (EOF on the control
// pipe; SIGKILL when it has not even been sent its spec, so that an unused guardian does not
// finish its start-up for nothing), then waits for it to exit and for the status reader to
// finish, and returns the guardian's wait result. Run calls it on every path; once the
// command has started it is only called after the guardian reported or died. Later calls
// return the same result.
func (g *guardianProc) close() error {
	if g.closed {
		return *g.waitErr
	}
	g.closed = true
	_ = g.ctl.Close()
	if !g.specSent {
		_ = g.proc.Kill() // not reaped yet (its wait is pending), so the PID is still ours
	} else {
		_ = g.proc.Signal(syscall.SIGCONT) // D7b: a stopped guardian could not see the EOF
	}
	for range g.events {
		// drain until the guardian exits
	}
	<-g.done
	return *g.waitErr
}
