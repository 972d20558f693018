package unitrun

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killRetryInterval is how often the guardian looks for descendants again to SIGKILL them once
// the grace period is over (new ones may have been forked during the walk).
const killRetryInterval = 50 * time.Millisecond

// ownStopTimeout bounds the guardian's own StopUnit call when conch died in scope mode (D7):
// connect, authenticate and enqueue the stop job. The guardian stops the command's tree by
// itself meanwhile, so a hung bus delays nothing.
const ownStopTimeout = 5 * time.Second

// supervisor is the guardian's state after the command started. It runs on the guardian's
// main goroutine only.
type supervisor struct {
	cmdPID    int // also the command's process group ID
	stopSig   syscall.Signal
	killAfter time.Duration
	out       eventWriter

	// Scope mode (D8): the scope the guardian lives in, and conch's PID, to tell systemd's
	// stop signal from the parent-death signal.
	scope        *wireScope
	parent       int
	orphaned     bool          // conch is gone: the guardian stops its own scope
	ownStopDone  chan struct{} // closed when the guardian's own StopUnit call has ended
	externalStop bool          // systemd began stopping the scope; reported once

	reaped     <-chan reapedChild
	allGone    bool // no child left: the command's tree is gone
	cmdReaped  bool
	cmdStatus  syscall.WaitStatus
	stopping   bool
	stoppedRun bool // the stop began while the command was still running
	graceOver  <-chan time.Time
	killTick   *time.Ticker
}

// reapedChild is one child reaped by wait4.
type reapedChild struct {
	pid int
	ws  syscall.WaitStatus
}

// scopeSignalGrace is how long, in scope mode, the guardian waits for its own
// stop signal after finding the command killed by a signal: only then, and
// it costs nothing when the command exits on its own.
const scopeSignalGrace = 100 * time.Millisecond

// run supervises until the command and every descendant are gone and reaped. It returns the
// command's wait status and whether the stop began while the command was still running.
// A stop begins on SIGTERM, on a stop or abort word, on EOF of control, or when the command
// exits (to stop what it left running).
func (s *supervisor) run(sigs <-chan os.Signal, control <-chan string) (syscall.WaitStatus, bool) {
	s.reaped = reapChildren()
	defer func() {
		if s.killTick != nil {
			s.killTick.Stop()
		}
	}()
	var tick <-chan time.Time
	for !s.allGone {
		select {
		case sig := <-sigs:
			s.onSignal(sig.(syscall.Signal))
		case word, ok := <-control:
			if !ok {
				control = nil
				s.conchGone()
			} else if word == ctlStop || word == ctlAbort {
				s.requestStop()
			}
		case c, ok := <-s.reaped:
			if ok && s.scope != nil && c.pid == s.cmdPID && c.ws.Signaled() && !s.stopping {
				// systemd signals every process of a stopping scope at
				// nearly the same instant: let a stop signal on its way
				// to us arrive first, so that the stop is reported as the
				// scope's (ScopeStopped), not as the command's own death
				select {
				case sig := <-sigs:
					s.onSignal(sig.(syscall.Signal))
				case <-time.After(scopeSignalGrace):
				}
			}
			s.handleReaped(c, ok)
		case <-s.graceOver:
			s.graceOver = nil
			s.killTick = time.NewTicker(killRetryInterval)
			tick = s.killTick.C
			s.killAll()
		case <-tick:
			s.killAll()
		}
	}
	if s.ownStopDone != nil {
		<-s.ownStopDone // bounded by ownStopTimeout
	}
	return s.cmdStatus, s.stoppedRun
}

// onSignal handles a caught signal. In direct mode only SIGTERM (also the parent-death signal)
// means stop. In scope mode the scope's stop signal also comes from systemd stopping the scope
// (RuntimeMaxSec, the bound service stopping, systemctl stop): the guardian reports it, stops
// the command's tree as well, and lives on until that tree is gone so that conch learns the
// command's status. A signal that arrives after conch died (the guardian was reparented) means
// conch is gone.
func (s *supervisor) onSignal(sig syscall.Signal) {
	if s.scope == nil {
		if sig == syscall.SIGTERM {
			s.requestStop()
		}
		return
	}
	if os.Getppid() != s.parent {
		s.conchGone()
		return
	}
	if sig != syscall.SIGTERM && sig != s.stopSig {
		return // SIGINT/SIGHUP from a terminal: the command's group has its own
	}
	if !s.externalStop {
		s.externalStop = true
		s.out.send(guardianEvent{Event: evStopSignal})
	}
	s.requestStop()
}

// conchGone handles conch's death (EOF of the control pipe, or the parent-death signal): stop
// the command's tree, and in scope mode ask systemd to stop the guardian's own scope first, so
// that the scope's stop signal and SIGKILL after its TimeoutStopSec reach every process in it,
// whatever the guardian sees (D7). The D-Bus call runs on a goroutine of its own, bounded by
// ownStopTimeout, which run joins.
func (s *supervisor) conchGone() {
	if s.scope != nil && !s.orphaned {
		s.orphaned = true
		s.ownStopDone = make(chan struct{})
		go func() {
			defer close(s.ownStopDone)
			ctx, cancel := context.WithTimeout(context.Background(), ownStopTimeout)
			defer cancel()
			_ = stopUnitAt(ctx, addressesOf(s.scope.Addrs), s.scope.Unit)
		}()
	}
	s.requestStop()
}

// handleReaped records one reaped child; ok false means none is left.
func (s *supervisor) handleReaped(c reapedChild, ok bool) {
	if !ok { // ECHILD: no child left, hence no descendant (we are their subreaper)
		s.allGone = true
		return
	}
	if c.pid == s.cmdPID {
		s.cmdReaped, s.cmdStatus = true, c.ws
		if s.scope != nil { // direct mode: Run takes the status from evExited alone
			code, sig := shellStatus(c.ws)
			s.out.send(guardianEvent{Event: evCmdExited, Status: code, Signal: int(sig)})
		}
		s.beginStop() // stop whatever the command left running (D7)
	}
}

// requestStop handles a stop request from conch or a signal. Children already reaped are
// accounted for first, so that a command that has just exited on its own is not reported as
// stopped and its PGID, possibly free by now, is not signalled.
func (s *supervisor) requestStop() {
	for drained := false; !drained && !s.allGone; {
		select {
		case c, ok := <-s.reaped:
			s.handleReaped(c, ok)
		default:
			drained = true
		}
	}
	if !s.allGone {
		s.beginStop()
	}
}

// beginStop sends the stop signal, then SIGCONT, to the command's process group and to every
// descendant, once, and arms the grace timer after which killAll runs. Descendants are looked
// for only while the guardian has a child (hasChildren): after a command that exited and left
// nothing behind, the usual case, stopping costs no /proc read at all. SIGCONT follows as
// systemd does it, so that a stopped process (Ctrl-Z, or SIGTTIN from reading the terminal in
// the background) acts on the stop signal now rather than only at SIGKILL.
func (s *supervisor) beginStop() {
	if s.stopping {
		return
	}
	s.stopping = true
	sigs := []syscall.Signal{s.stopSig}
	if s.stopSig != syscall.SIGCONT && s.stopSig != syscall.SIGKILL {
		sigs = append(sigs, syscall.SIGCONT)
	}
	for _, sig := range sigs {
		if !s.cmdReaped {
			s.stoppedRun = true
			// The group first: one atomic signal also reaches members forked during the walk.
			// The PGID stays valid while the unreaped leader holds it.
			_ = signalGroup(s.cmdPID, sig)
		}
		if hasChildren() { // none after a command that left nothing behind: no walk at all
			_ = signalDescendants(sig)
		}
	}
	s.graceOver = time.After(s.killAfter)
}

// killAll SIGKILLs the command's process group (while its PGID is still certainly ours) and
// every descendant. It is repeated until none is left.
func (s *supervisor) killAll() {
	if !s.cmdReaped {
		_ = signalGroup(s.cmdPID, syscall.SIGKILL)
	}
	if hasChildren() {
		_ = signalDescendants(syscall.SIGKILL)
	}
}

// reapChildren reaps every child of the calling process, including orphans reparented to it
// as a subreaper, and sends each to the returned channel. It closes the channel and ends when
// wait4 reports that no child is left (ECHILD); the channel's buffer and the supervisor's loop
// keep it from blocking for long.
func reapChildren() <-chan reapedChild {
	ch := make(chan reapedChild, 16)
	go func() {
		defer close(ch)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			ch <- reapedChild{pid: pid, ws: syscall.WaitStatus(ws)}
		}
	}()
	return ch
}
