package unitrun

import (
	"fmt"
	"syscall"
	"time"
)

// This file runs in the caller's process (conch): a guardian that does not act is treated as
// dead (D7b): one that is stopped (SIGSTOP, a debugger) is woken, one that does not answer go
// is killed and replaced, so a held slot never sits idle because of it.

// Liveness bounds (D7b).
const (
	// guardianCheckInterval is how often Run, while it follows the guardian, looks whether
	// the guardian is stopped (state T in /proc) and sends it SIGCONT: a stopped guardian
	// neither starts the command on go nor reaps it when it exits, and the slot would sit
	// held with nothing running. One read of /proc/PID/stat each time.
	guardianCheckInterval = 250 * time.Millisecond
	// goTimeout is how long Run waits, after go, for the guardian to say the command started
	// (or could not be): a preloaded guardian needs a fork and an exec, milliseconds; one
	// silent this long (hung, or stopped again at once) is killed, anything it may have
	// started is SIGKILLed, and in direct mode a fresh guardian gets the command. Generous for
	// a loaded machine, where a start can take a second.
	goTimeout = 5 * time.Second
	// readyTimeout is the same bound on the guardian's ready once Run sent it the command's
	// spec (a guardian that was not preloaded decodes it then): longer, as a fresh guardian may
	// still be starting on a loaded machine (see helloTimeout).
	readyTimeout = 10 * time.Second
)

// errGoUnanswered: the guardian did not answer go within goTimeout and was killed; the
// command did not start under it (prepared.run starts it with a fresh guardian once).
var errGoUnanswered = fmt.Errorf("%w: did not answer go within %v (hung or stopped): killed", ErrGuardian, goTimeout)

// errNotReady: the guardian did not say it was ready within readyTimeout of Run's call and was
// killed; it had not been told to start anything (prepared.run starts afresh once).
var errNotReady = fmt.Errorf("%w: not ready within %v (hung or stopped): killed", ErrGuardian, readyTimeout)

// wakeIfStopped sends SIGCONT to the guardian when /proc says it is stopped (D7b). It
// reports whether it did.
func (g *guardianProc) wakeIfStopped() bool {
	st, err := readProcStat(g.pid)
	if err != nil || (st.state != 'T' && st.state != 't') || g.gone() {
		return false
	}
	_ = g.proc.Signal(syscall.SIGCONT)
	return true
}

// goUnanswered kills a guardian that has not answered go in time (D7b); the status pipe's EOF
// then ends follow, and the mode's end kills whatever the guardian may have started.
func (r *runner) goUnanswered(rec *runRecord) {
	if rec.pid != 0 || rec.facts.reported {
		return
	}
	rec.goUnanswered = true
	rec.err = fmt.Errorf("%s: not started: %w", r.spec.Path, errGoUnanswered)
	_ = r.g.proc.Kill()
}
