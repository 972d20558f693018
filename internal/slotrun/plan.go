package slotrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// planning is the run's plan (unitrun.StartPlan): its stop timing, decided at once (D7), and
// its scope (D8), decided beside the etcd round trips where systemd runs (D8b); without
// systemd, or with unitrun.ScopeNever, it is decided at once, before any etcd call, as D8
// says: a required scope then ends the run having written nothing.
type planning struct {
	*unitrun.Plan
	reported sync.Once // the note of unitrun.ScopeAuto falling back to direct mode
}

// startPlanning starts building the plan for opts under ctx; wait waits for its scope.
func startPlanning(ctx context.Context, opts unitrun.Options) *planning {
	return &planning{Plan: unitrun.StartPlan(ctx, opts)}
}

// wait blocks until the plan's scope is decided and returns nil, or ErrNoScope, wrapping why,
// for a scope required and not made, and tells rep, once, why unitrun.ScopeAuto runs the child
// directly (NoScope).
func (p *planning) wait(rep Reporter) error {
	why, err := p.Wait()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoScope, err)
	}
	if why != nil {
		p.reported.Do(func() { rep.Note(Note{Kind: NoScope, Err: why}) })
	}
	return nil
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
