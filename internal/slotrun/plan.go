package slotrun

import (
	"fmt"
	"sync"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// planning is the run's scope plan (D8) being decided beside the etcd round trips where
// systemd runs (unitrun.StartPlanning, D8b); without systemd, or with unitrun.ScopeNever, it
// is decided at once, before any etcd call, as D8 says: a required scope then ends the run
// having written nothing.
type planning struct {
	*unitrun.Planning
	reported sync.Once // the note of unitrun.ScopeAuto falling back to direct mode
}

// startPlanning starts deciding the plan for opts; wait returns it.
func startPlanning(opts unitrun.ScopeOptions) *planning {
	return &planning{Planning: unitrun.StartPlanning(opts)}
}

// wait blocks until the plan is decided and returns it, or ErrNoScope, wrapping why, for a
// scope required and not made. The first call from the run's goroutine (report true) tells
// rep, once, why unitrun.ScopeAuto runs the child directly (NoScope); the prestarter's calls
// it with report false.
func (p *planning) wait(rep Reporter, report bool) (*unitrun.Plan, error) {
	plan, err := p.Wait()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoScope, err)
	}
	if why := plan.Fallback(); report && why != nil {
		p.reported.Do(func() { rep.Note(Note{Kind: NoScope, Err: why}) })
	}
	return plan, nil
}

// close waits for the plan and closes it.
func (p *planning) close() { p.Close() }

// prestartOn keeps a guardian (D7) started ahead of the slot (unitrun.Prestarter) while the
// run is not going to wait long, so that the guardian's start-up overlaps the etcd round trips
// instead of following them: from before the enqueue until the semaphore says we wait behind
// others, and again from the moment we are next in line. A run that waits in a long queue has
// no guardian, so it stays small. Once our key is written and we are next in line (or hold
// already), the guardian is also sent the command's whole spec for that key (PreloadWith), so
// that when the slot comes the hand-off's critical path is one word to the guardian and its
// fork: the fencing token of the env is the key's create revision, known from the enqueue on.
// It is called with every queue event e (sema.Options.OnEvent).
func prestartOn(ps *unitrun.Prestarter, e sema.Event) {
	switch e.Kind {
	case sema.Enqueued: // held at once, or about to wait: the key is known either way
		ps.Want(true, e.Rev, int64(e.Lease))
	case sema.Waiting: // with NodeBusy (D11) there is no key of ours yet: Rev is 0
		ps.Want(e.Ahead == 0, e.Rev, int64(e.Lease))
	}
}
