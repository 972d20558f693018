package unitrun

// This file runs in the guardian process (D7): keeping the command's tree, from its start
// until every process in it is gone and reaped.

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killRetryInterval is how often the guardian looks for descendants again to SIGKILL them once
// the grace period is over (new ones may have been forked during the walk).
const killRetryInterval = 50 * time.Millisecond

// treeKeeper is the guardian's state after the command started (its counterpart in the
// caller's process is runner). It runs on the guardian's main goroutine only.
type treeKeeper struct {
	cmdPID    int // also the command's process group ID
	stopSig   syscall.Signal
	killAfter time.Duration
	out       eventWriter
	mode      guardianMode

	reaped     <-chan reapedChild
	allGone    bool // no child left: the command's tree is gone
	cmdReaped  bool
	cmdStatus  syscall.WaitStatus
	stopping   bool
	stoppedRun bool // the stop began while the command was still running
	graceOver  <-chan time.Time
	killTick   *time.Ticker

	// D7b: the guardian's copy of the lease's deadline, and its own fence
	clock     leaseClock
	fenceStop *time.Timer // at clock.stopAt: begin the stop on our own
	fenceKill *time.Timer // at clock.killBy: SIGKILL whatever stop is under way
	fenced    bool        // the stop began at fenceStop, not at conch's word
}

// reapedChild is one child reaped by wait4.
type reapedChild struct {
	pid int
	ws  syscall.WaitStatus
}

// run keeps the tree until the command and every descendant are gone and reaped. It returns the
// command's wait status and whether the stop began while the command was still running.
// A stop begins on SIGTERM, on a stop or abort word, on EOF of control, or when the command
// exits (to stop what it left running).
func (s *treeKeeper) run(sigs <-chan os.Signal, control <-chan string) (syscall.WaitStatus, bool) {
	s.reaped = reapChildren()
	s.armFence()
	defer func() {
		if s.killTick != nil {
			s.killTick.Stop()
		}
		s.disarmFence()
	}()
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
			} else if word == ctlKill {
				s.killNow()
			} else if s.clock.parse(word) {
				s.armFence()
			}
		case <-timerC(s.fenceStop):
			s.fenceStop = nil
			s.fenceOnOwn()
		case <-timerC(s.fenceKill):
			s.fenceKill = nil
			s.fenceOnOwn()
			s.escalate()
		case c, ok := <-s.reaped:
			if ok && c.pid == s.cmdPID {
				s.mode.settle(s, c, sigs)
			}
			s.handleReaped(c, ok)
		case <-s.graceOver:
			s.graceOver = nil
			s.escalate()
		case <-tickerC(s.killTick):
			s.killAll()
		}
	}
	s.mode.join()
	return s.cmdStatus, s.stoppedRun
}

// onSignal handles a caught signal as the mode says (guardianMode.signal).
func (s *treeKeeper) onSignal(sig syscall.Signal) { s.mode.signal(s, sig) }

// conchGone handles conch's death (EOF of the control pipe, or the parent-death signal): the
// mode's part first (scope mode: stop the guardian's own scope), then stop the command's tree.
func (s *treeKeeper) conchGone() {
	s.mode.conchGone(s)
	s.requestStop()
}

// handleReaped records one reaped child; ok false means none is left.
func (s *treeKeeper) handleReaped(c reapedChild, ok bool) {
	if !ok { // ECHILD: no child left, hence no descendant (we are their subreaper)
		s.allGone = true
		return
	}
	if c.pid == s.cmdPID {
		s.cmdReaped, s.cmdStatus = true, c.ws
		s.mode.cmdReaped(s, c.ws)
		s.beginStop() // stop whatever the command left running (D7)
	}
}

// requestStop handles a stop request from conch or a signal. Children already reaped are
// accounted for first, so that a command that has just exited on its own is not reported as
// stopped and its PGID, possibly free by now, is not signalled.
func (s *treeKeeper) requestStop() {
	if s.drainReaped(); !s.allGone {
		s.beginStop()
	}
}

// drainReaped handles the children already reaped, without waiting.
func (s *treeKeeper) drainReaped() {
	for !s.allGone {
		select {
		case c, ok := <-s.reaped:
			s.handleReaped(c, ok)
		default:
			return
		}
	}
}

// beginStop sends the stop signal, then SIGCONT, to the command's process group and to every
// descendant, once, and arms the grace timer after which killAll runs. Descendants are looked
// for only while the guardian has a child (hasChildren): after a command that exited and left
// nothing behind, the usual case, stopping costs no /proc read at all. SIGCONT follows as
// systemd does it, so that a stopped process (Ctrl-Z, or SIGTTIN from reading the terminal in
// the background) acts on the stop signal now rather than only at SIGKILL.
func (s *treeKeeper) beginStop() {
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

// escalate ends the grace: it SIGKILLs the tree now and again every killRetryInterval
// until none is left (killAll), once.
func (s *treeKeeper) escalate() {
	if s.killTick != nil {
		return
	}
	s.graceOver = nil
	s.killTick = time.NewTicker(killRetryInterval)
	s.killAll()
}

// killNow handles a kill word (D7b: the caller learnt too late that the command must stop):
// as requestStop, but with SIGKILL to the command's group and every descendant at once, no
// stop signal and no grace.
func (s *treeKeeper) killNow() {
	if s.drainReaped(); s.allGone {
		return
	}
	if !s.stopping {
		s.stopping = true
		s.stoppedRun = !s.cmdReaped
	}
	s.escalate()
}

// tickerC is t's channel, nil (never ready) for no ticker.
func tickerC(t *time.Ticker) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// killAll SIGKILLs the command's process group (while its PGID is still certainly ours) and
// every descendant. It is repeated until none is left.
func (s *treeKeeper) killAll() {
	if !s.cmdReaped {
		_ = signalGroup(s.cmdPID, syscall.SIGKILL)
	}
	if hasChildren() {
		_ = signalDescendants(syscall.SIGKILL)
	}
}

// reapChildren reaps every child of the calling process, including orphans reparented to it
// as a subreaper, and sends each to the returned channel. It closes the channel and ends when
// wait4 reports that no child is left (ECHILD); the channel's buffer and the treeKeeper's loop
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

// armFence (re)starts the fence timers from the clock, if conch sent a deadline (D7b).
func (s *treeKeeper) armFence() {
	if !s.clock.set() {
		return
	}
	s.disarmFence()
	s.fenceStop = time.NewTimer(time.Until(s.clock.stopAt))
	s.fenceKill = time.NewTimer(time.Until(s.clock.killBy))
}

func (s *treeKeeper) disarmFence() {
	for _, t := range []*time.Timer{s.fenceStop, s.fenceKill} {
		if t != nil {
			t.Stop()
		}
	}
	s.fenceStop, s.fenceKill = nil, nil
}

// fenceOnOwn begins the stop at the guardian's copy of the deadline, conch having sent
// neither a newer deadline nor a stop word (D7b): conch is stopped, frozen or stuck, and the
// command must be gone before the server can hand the slot on. It is reported in evExited.
func (s *treeKeeper) fenceOnOwn() {
	if s.drainReaped(); s.stopping || s.allGone {
		return
	}
	s.fenced = true
	s.requestStop()
}
