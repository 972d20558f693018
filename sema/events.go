// Queue events: what Acquire reports through Options.OnEvent (D10).

package sema

import (
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventKind says what happened in the queue.
type EventKind int

// Event kinds, in the order they usually happen.
const (
	// Enqueued: our key is written; Ahead is the number of keys ranked before
	// ours (holders and waiters), -1 when there are more than the enqueue's
	// read returns (it is O(max), D2); OtherCapacities counts
	// keys under the same name outside our capacity while another capacity
	// is live (Options.AllowOtherCapacity, D17; 0 when they are only keys
	// that are not conch's, D6g); OtherKind counts conch's keys of the other
	// kind (node-suffixed next to a lease key, lease-suffixed next to a node
	// key) among those the enqueue read returns (D11 warning).
	Enqueued EventKind = iota
	// Waiting: we wait; Ahead is the number of waiters ahead of us, 0 at
	// the head of the queue (exact at enqueue and at the head, an upper
	// bound otherwise: ranking reads return O(N) keys, D2). With NodeBusy
	// (Spread) we have no key yet: this node's key is there, held or
	// waiting, and we wait for it to go (D11); Ahead is then 1.
	Waiting
	// Held: we hold a slot; Rev is the fencing token.
	Held
	// Reentering: our key or lease was lost while queued (Err says
	// which); we start over at the back of the queue (04_sema.md,
	// "Failure behavior").
	Reentering
)

// Event describes one queue transition.
type Event struct {
	Kind            EventKind
	Ahead           int // Enqueued: keys before ours; Waiting: waiters ahead of us (0: next in line)
	Rev             int64
	Lease           clientv3.LeaseID
	TTL             time.Duration // granted lease TTL
	Cluster         uint64        // the ID of the etcd cluster that granted the lease (D18), 0 if not known
	OtherCapacities int64
	OtherKind       int  // Enqueued: see EventKind Enqueued (D11)
	NodeBusy        bool // Waiting: see EventKind Waiting (D11)
	// Paused: Waiting while the semaphore is paused (D16), with the pause;
	// a key of rank < max waits for the pause to go, in its place.
	Paused *schema.Pause
	// Unreachable: Waiting while etcd has not answered our lease's keep-alives for a second
	// or more (no connection, or a member that does not answer); the place is kept while
	// etcd keeps the lease. A Waiting event with it false follows when etcd answers again.
	Unreachable bool
	Err         error
}

// emit calls Options.OnEvent with e, one event at a time (waitReport).
func (s *Semaphore) emit(e Event) {
	s.wr.mu.Lock()
	defer s.wr.mu.Unlock()
	s.emitLocked(e)
}

func (s *Semaphore) emitLocked(e Event) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}
