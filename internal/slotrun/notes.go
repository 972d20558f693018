package slotrun

import (
	"context"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
)

// Reporter is told what a run does (Run): the package never logs, the caller words each
// event for its operators and its service manager (D10). Its methods are called from the
// run's goroutine, one at a time, except Stopping, which may come from any goroutine.
type Reporter interface {
	// Event is every queue transition of sema (Enqueued, Waiting, Held, Reentering).
	Event(e sema.Event)
	// Started: the command runs as pid, in the systemd scope named scope ("" when it runs
	// directly; D8).
	Started(pid int, scope string)
	// Stopping: the slot is being lost (cause, D7), so the child is being stopped.
	Stopping(cause error)
	// Released: the child exited with status after holding the slot for held, and the slot
	// was given back (a ReleaseFailed note follows when that failed: it frees at expiry).
	Released(status int, held time.Duration)
	// HeldAfter: the slot is kept after the run (D13), whose child exited with status.
	HeldAfter(ha sema.HeldAfter, status int)
	// Skipped: this period's run is done (D15, m), so the child does not start.
	Skipped(m fleet.OnceMarker)
	// Note is anything else worth saying (NoteKind).
	Note(n Note)
}

// NoteKind says what a Note tells.
type NoteKind int

const (
	// NoScope (detail): the child runs directly, not in a scope, because of Err (D8).
	NoScope NoteKind = iota
	// ScopeFailed (warning): the scope could not be created (Err), so the child runs directly
	// under the run's own supervision (unitrun.ScopeAuto).
	ScopeFailed
	// Supervision (warning): unitrun's warning (Err) about the child's supervision.
	Supervision
	// Escalated (warning): the child did not stop within its stop grace KillAfter of
	// StopSignal, and is killed with SIGKILL (D7, D3a).
	Escalated
	// LeaseGranted (detail): etcd granted a lease of TTL, longer than asked (D4: used as granted).
	LeaseGranted
	// ShortLease (warning): the granted lease TTL is too short to fence a child with the stop
	// grace KillAfter in time (D7; sema.FenceTooLate, MinTTL, MaxKillAfter).
	ShortLease
	// Requeued: the slot was lost (Err) before the command started: queueing again.
	Requeued
	// KeepFailed (warning): the slot could not be kept after the run (Err, D13).
	KeepFailed
	// MarkFailed (warning): the run succeeded, but the period's marker was not written (Err,
	// D15): the next run may start at once.
	MarkFailed
	// Marked (detail): the period's marker is written, for TTL (D15).
	Marked
	// ReleaseFailed: the release failed (Err): the key goes at lease expiry, within TTL.
	ReleaseFailed
)

// Note is one thing a run tells its Reporter besides its events: Kind says which, and which
// of the other fields it sets.
type Note struct {
	Kind       NoteKind
	Err        error
	TTL        time.Duration
	KillAfter  time.Duration
	StopSignal syscall.Signal
}

// watchEscalation tells the move to SIGKILL (unitrun's WatchEscalation): once the child is
// being stopped (runCtx ends: a signal, or the slot is being lost; or its run-time limit,
// counted from start, has passed) and has not ended a stop grace later, an Escalated note says
// that it ignored its stop signal and is killed with SIGKILL (by the guardian, or by systemd
// at the scope's TimeoutStopSec: D7). Without it the only line was the run's end, and an
// operator could not tell a job that stopped cleanly from one that was killed (D3a). The
// returned stop, called once the run has ended, ends the watch.
func (r *run) watchEscalation(runCtx context.Context, start time.Time) (stop func()) {
	t := r.timing()
	return t.WatchEscalation(runCtx, start, func() {
		r.rep.Note(Note{Kind: Escalated, KillAfter: t.KillAfter, StopSignal: t.StopSignal})
	})
}

// leaseCheck returns the OnEvent hook that looks once at the lease etcd granted (the first
// event that carries its TTL): a LeaseGranted note when etcd raised the TTL asked to its
// minimum (D4), and a ShortLease note when the child's stop grace is too long to fence within
// that lease (D7). Whether to print them is the Reporter's choice (D4a).
func (r *run) leaseCheck() func(sema.Event) {
	done := false
	return func(e sema.Event) {
		if done || e.TTL <= 0 {
			return
		}
		done = true
		if e.TTL > r.cfg.TTL {
			r.rep.Note(Note{Kind: LeaseGranted, TTL: e.TTL})
		}
		if ka := r.timing().KillAfter; sema.FenceTooLate(e.TTL, ka) {
			r.rep.Note(Note{Kind: ShortLease, TTL: e.TTL, KillAfter: ka})
		}
	}
}
