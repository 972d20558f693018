package unitrun

import "syscall"

// This file runs in the caller's process (conch): how a Result is decided.

// stopReason records why Run asked the guardian to stop the command; the first reason wins.
type stopReason int

const (
	notStopping      stopReason = iota
	stopByContext               // the caller's ctx ended (slot lost, signal)
	stopByRuntimeMax            // Run's own RuntimeMax timer fired (the stop timing's)
)

// endFacts are what Run recorded, where it happened, about how one command ended. decideResult
// alone turns them into a Result. Every field is a fact, none a conclusion.
type endFacts struct {
	started bool // the guardian reported evStarted

	// reported is true when the guardian reported the command's exit (evExited, or in scope
	// mode evCmdExited); status and signal are then the
	// command's, in the shell convention. False when the guardian died or was killed first.
	reported bool
	status   int
	signal   syscall.Signal

	// asked is the first reason Run asked for a stop, notStopping if it never did.
	asked stopReason
	// endedFirst is true when the command's own exit came before the stop began: in direct
	// mode the guardian's evExited without Stopped, in scope mode evCmdExited before Run asked.
	endedFirst bool

	// guardianFenced: the guardian began the stop on its own at its copy of the lease's
	// deadline, the caller having gone silent (D7b).
	guardianFenced bool

	// Scope mode only (D8).
	//
	// systemdStop: the guardian got the scope's stop signal (evStopSignal): systemd stopped
	// the scope, at Run's request or on its own.
	systemdStop bool
	// pastRuntimeMax: the stop timing's RuntimeMax > 0 and the command ended at or after RuntimeMax from
	// the scope's start, when systemd's RuntimeMaxSec fires.
	pastRuntimeMax bool
	// guardianKilled: the guardian died of SIGKILL (the end of the scope's TimeoutStopSec, or
	// KillSignal=SIGKILL): the scope was being stopped.
	guardianKilled bool
	// scopeGone: the scope is confirmed gone, and with it every process that was in it.
	scopeGone bool
}

// decideResult is the one place where a Result is decided, from the facts Run
// recorded; see Result for the meaning of each field.
//
//   - A command the guardian did not report on has ExitStatus -1 (unknown), except in scope
//     mode when the scope was being stopped (by Run, by systemd, or the guardian's SIGKILL) and
//     is gone: it then died with the scope, of SIGKILL.
//   - Stopped: Run asked for the stop because ctx ended, before the command ended on its own.
//   - RuntimeExceeded: Run's RuntimeMax timer asked for the stop, before the command ended on
//     its own; or, in scope mode, systemd's RuntimeMaxSec did (the command ended past RuntimeMax,
//     stopped by systemd or killed by a signal) unless Run had asked for a stop because ctx
//     ended.
//   - Fenced: the guardian stopped the command on its own at the lease's deadline (D7b).
//   - ScopeStopped: systemd stopped the scope on its own: Run never asked, and it was not the
//     runtime limit.
func decideResult(f endFacts) Result {
	res := Result{Started: f.started, ExitStatus: -1}
	if f.reported {
		res.ExitStatus, res.Signal = f.status, f.signal
	}
	if !f.started {
		return res
	}
	if !f.reported && f.scopeGone && (f.asked != notStopping || f.systemdStop || f.guardianKilled) {
		res.ExitStatus, res.Signal = 128+int(syscall.SIGKILL), syscall.SIGKILL
	}
	askedWhileRunning := f.asked != notStopping && !f.endedFirst
	res.Stopped = askedWhileRunning && f.asked == stopByContext
	res.RuntimeExceeded = askedWhileRunning && f.asked == stopByRuntimeMax
	if f.pastRuntimeMax && f.asked != stopByContext && (f.systemdStop || res.Signal != 0) {
		res.RuntimeExceeded = true // systemd's RuntimeMaxSec fired before Run's own timer
	}
	res.ScopeStopped = f.systemdStop && f.asked == notStopping && !res.RuntimeExceeded
	res.Fenced = f.guardianFenced
	return res
}
