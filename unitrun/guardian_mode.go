package unitrun

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/systemd"
)

// This file runs in the guardian process: what differs between direct mode and scope mode
// (D8) on the guardian's side of the pipe. The caller's side has runMode.

// guardianMode is the guardian's mode: directGuardian, or *scopeGuardian when the guardian
// lives in a scope. GuardianMain picks it once from the spec (newGuardianMode).
type guardianMode interface {
	// signal handles a caught signal.
	signal(s *treeKeeper, sig syscall.Signal)
	// conchGone does the mode's part when conch died, before the tree is stopped.
	conchGone(s *treeKeeper)
	// settle runs when the command itself has just been reaped with c, before handleReaped
	// takes it: scope mode lets a stop signal on its way arrive first.
	settle(s *treeKeeper, c reapedChild, sigs <-chan os.Signal)
	// cmdReaped reports the command's own end, when the mode reports it before evExited.
	cmdReaped(s *treeKeeper, ws syscall.WaitStatus)
	// join waits for what the mode started (scope mode: its own StopUnit call).
	join()
}

// newGuardianMode returns the mode of a guardian given scope (nil: direct mode) and conch's
// PID.
func newGuardianMode(scope *wireScope, parent int) guardianMode {
	if scope == nil {
		return directGuardian{}
	}
	return &scopeGuardian{scope: scope, parent: parent}
}

// directGuardian: only SIGTERM (also the parent-death signal) means stop, and conch takes the
// command's status from evExited alone.
type directGuardian struct{}

func (directGuardian) signal(s *treeKeeper, sig syscall.Signal) {
	if sig == syscall.SIGTERM {
		s.requestStop()
	}
}

func (directGuardian) conchGone(*treeKeeper) {}

func (directGuardian) settle(*treeKeeper, reapedChild, <-chan os.Signal) {}

func (directGuardian) cmdReaped(*treeKeeper, syscall.WaitStatus) {}

func (directGuardian) join() {}

// scopeSignalGrace is how long, in scope mode, the guardian waits for its own
// stop signal after finding the command killed by a signal: only then, and
// it costs nothing when the command exits on its own.
const scopeSignalGrace = 100 * time.Millisecond

// ownStopTimeout bounds the guardian's own StopUnit call when conch died in scope mode (D7):
// connect, authenticate and enqueue the stop job. The guardian stops the command's tree by
// itself meanwhile, so a hung bus delays nothing.
const ownStopTimeout = 5 * time.Second

// scopeGuardian is a guardian in a scope (D8): the scope it lives in, and conch's PID, to
// tell systemd's stop signal from the parent-death signal.
type scopeGuardian struct {
	scope        *wireScope
	parent       int
	orphaned     bool          // conch is gone: the guardian stops its own scope
	ownStopDone  chan struct{} // closed when the guardian's own StopUnit call has ended
	externalStop bool          // systemd began stopping the scope; reported once
}

// signal: the scope's stop signal also comes from systemd stopping the scope (RuntimeMaxSec,
// the bound service stopping, systemctl stop): the guardian reports it, stops the command's
// tree as well, and lives on until that tree is gone so that conch learns the command's
// status. A signal that arrives after conch died (the guardian was reparented) means conch is
// gone.
func (g *scopeGuardian) signal(s *treeKeeper, sig syscall.Signal) {
	if os.Getppid() != g.parent {
		s.conchGone()
		return
	}
	if sig != syscall.SIGTERM && sig != s.stopSig {
		return // SIGINT/SIGHUP from a terminal: the command's group has its own
	}
	if !g.externalStop {
		g.externalStop = true
		s.out.send(guardianEvent{Event: evStopSignal})
	}
	s.requestStop()
}

// conchGone asks systemd to stop the guardian's own scope, so that the scope's stop signal
// and SIGKILL after its TimeoutStopSec reach every process in it, whatever the guardian sees
// (D7). The D-Bus call runs on a goroutine of its own, bounded by ownStopTimeout, which join
// waits for.
func (g *scopeGuardian) conchGone(*treeKeeper) {
	if g.orphaned {
		return
	}
	g.orphaned = true
	g.ownStopDone = make(chan struct{})
	go func() {
		defer close(g.ownStopDone)
		ctx, cancel := context.WithTimeout(context.Background(), ownStopTimeout)
		defer cancel()
		_ = systemd.StopUnitAt(ctx, g.scope.Addrs, g.scope.Unit)
	}()
}

// settle: systemd signals every process of a stopping scope at nearly the same instant: a
// command killed by a signal lets a stop signal on its way to the guardian arrive first, so
// that the stop is reported as the scope's (ScopeStopped), not as the command's own death.
func (g *scopeGuardian) settle(s *treeKeeper, c reapedChild, sigs <-chan os.Signal) {
	if !c.ws.Signaled() || s.stopping {
		return
	}
	select {
	case sig := <-sigs:
		s.onSignal(sig.(syscall.Signal))
	case <-time.After(scopeSignalGrace):
	}
}

// cmdReaped sends evCmdExited at once: systemd may SIGKILL the guardian at the end of the
// scope's TimeoutStopSec before it can send evExited.
func (g *scopeGuardian) cmdReaped(s *treeKeeper, ws syscall.WaitStatus) {
	code, sig := shellStatus(ws)
	s.out.send(guardianEvent{Event: evCmdExited, Status: code, Signal: int(sig)})
}

func (g *scopeGuardian) join() {
	if g.ownStopDone != nil {
		<-g.ownStopDone // bounded by ownStopTimeout
	}
}
