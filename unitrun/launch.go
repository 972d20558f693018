package unitrun

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// guardianProc is Run's handle on a running guardian.
type guardianProc struct {
	pid    int
	ctl    *os.File             // write end of the control pipe
	events <-chan guardianEvent // closed when the guardian exited (status pipe EOF)
	exited <-chan error         // the guardian's wait result; receives exactly once
}

// startGuardian starts the guardian (D7) with the control and status pipes and sends it the
// spec, and in scope mode the scope it is to live in (D8). The guardian is forked by a goroutine locked to its OS thread that stays in
// wait4 until the guardian exits: Linux delivers the parent-death signal (SIGTERM) when the
// forking thread ends, so that thread must outlive the guardian, and it does unless the whole
// process dies, which is exactly when the signal should fire. That goroutine and the status
// reader both end when the guardian exits; close waits for them.
func startGuardian(spec Spec, foreground bool, scope *wireScope) (*guardianProc, error) {
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

	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine ends locked, so the runtime retires the thread
		// instead of reusing it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	err = <-started
	_, _ = ctlR.Close(), stW.Close() // the guardian has its copies
	if err != nil {
		_, _ = ctlW.Close(), stR.Close()
		return nil, fmt.Errorf("%w: cannot start %s: %v", ErrGuardian, spec.Guardian[0], err)
	}
	g := &guardianProc{pid: cmd.Process.Pid, ctl: ctlW, events: readEvents(stR), exited: exited}

	line, err := json.Marshal(wireSpec{
		Path:       spec.Path,
		Args:       spec.Args,
		Env:        spec.Env,
		Dir:        spec.Dir,
		StopSignal: int(spec.StopSignal),
		KillAfter:  spec.KillAfter,
		Foreground: foreground,
		Scope:      scope,
	})
	if err == nil {
		_, err = g.ctl.Write(append(line, '\n'))
	}
	if err != nil {
		_ = g.close()
		return nil, fmt.Errorf("%w: cannot send the spec: %v", ErrGuardian, err)
	}
	return g, nil
}

// send writes one control word. An error means the guardian is gone, which Run learns from
// the status pipe's EOF, so callers may ignore it.
func (g *guardianProc) send(word string) error {
	_, err := g.ctl.Write([]byte(word + "\n"))
	return err
}

// close tells the guardian to abort if it has not started the command (EOF on the control
// pipe), then waits for it to exit and for the status reader to finish. Run calls it on every
// path; once the command has started it is only called after the guardian reported or died.
func (g *guardianProc) close() error {
	_ = g.ctl.Close()
	for range g.events {
		// drain until the guardian exits
	}
	return <-g.exited
}
