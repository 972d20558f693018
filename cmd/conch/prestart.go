package main

import (
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// prestarter keeps a guardian (D7) started ahead of the slot (unitrun.Prestarter) while conch
// is not going to wait long, so that the guardian's start-up overlaps the etcd round trips
// instead of following them: from before the enqueue until the semaphore says we wait behind
// others, and again from the moment we are next in line. A conch that waits in a long queue
// has no guardian, so it stays small. Once our key is written and we are next in line (or
// hold already), the guardian is also sent the command's whole spec for that key
// (preloadWith), so that when the slot comes the hand-off's critical path is one word to the
// guardian and its fork: the fencing token of the env is the key's create revision, known
// from the enqueue on. Its owner, the run, keeps one prestarter for all its holdings.
type prestarter struct{ *unitrun.Prestarter }

// startPrestarter starts a guardian for spec (its Guardian, Stdin, Stdout and Stderr; the
// rest is given to Prepared.Run) in the background and returns at once.
func startPrestarter(spec unitrun.Spec) *prestarter {
	return &prestarter{unitrun.StartPrestarter(spec)}
}

// onEvent is called with every queue event (sema.Options.OnEvent): waiting behind others
// closes the guardian, being next in line starts one, for the key the event names.
func (ps *prestarter) onEvent(e sema.Event) {
	switch e.Kind {
	case sema.Enqueued: // held at once, or about to wait: the key is known either way
		ps.Want(true, e.Rev, int64(e.Lease))
	case sema.Waiting: // with NodeBusy (D11) there is no key of ours yet: Rev is 0
		ps.Want(e.Ahead == 0, e.Rev, int64(e.Lease))
	}
}

// preloadWith sets the function giving the command's spec for the key created at rev with
// lease; call it before the first queue event.
func (ps *prestarter) preloadWith(load func(rev, lease int64) unitrun.Spec) { ps.PreloadWith(load) }

// take returns the guardian for the slot now held (nil: unitrun.Run reports why it cannot
// start one); close and reset (between holdings whose command never started) end it.
func (ps *prestarter) take() *unitrun.Prepared { return ps.Take() }
func (ps *prestarter) reset()                  { ps.Reset() }
func (ps *prestarter) close()                  { ps.Close() }
