// etcd losing or rewinding its state (D18): what a lease sees of etcd's epoch.

package sema

import (
	"context"
	"fmt"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// epochCheckTimeout bounds the linearizable read that confirms a revision lower than one
// already seen (epochCheck): a member that does not answer it is not taken for a rewound one.
const epochCheckTimeout = time.Second

// epochKey is the key the confirming read asks for (count only): any key would do, since
// only the answer's header revision counts.
const epochKey = "/conch/v1/epoch"

// epochCheck judges the header of one answered keep-alive (cluster, rev) against what the
// lease saw of etcd so far (D18). A cluster ID other than the one that granted the lease is
// a new store. A revision lower than the highest one seen may be a member that lags behind
// (a keep-alive's header is the answering member's, not a linearizable read), so it is
// confirmed by a linearizable read, bounded by epochCheckTimeout, which reflects every
// revision ever seen: lower there, the store went back. It returns the loss (stateLost), or
// nil, and records the highest revision seen. It runs on the lease's goroutine (run).
func (l *lease) epochCheck(ctx context.Context, cluster uint64, rev int64) error {
	l.mu.Lock()
	was, seen := l.cluster, l.maxRev
	l.mu.Unlock()
	if cluster != 0 && was != 0 && cluster != was {
		return l.stateLost(fmt.Sprintf("its cluster ID changed from %016x to %016x", was, cluster))
	}
	if rev > 0 && rev < seen {
		rctx, cancel := context.WithTimeout(ctx, epochCheckTimeout)
		resp, err := l.c.Get(rctx, epochKey, clientv3.WithCountOnly())
		cancel()
		if err != nil { // no answer: nothing proven, the keep-alives go on
			return nil
		}
		if rev = resp.Header.Revision; rev < seen {
			return l.stateLost(fmt.Sprintf("its revision went back from %d to %d", seen, rev))
		}
	}
	l.mu.Lock()
	l.maxRev = max(l.maxRev, rev)
	l.mu.Unlock()
	return nil
}

// notFoundCause is why the lease ends when etcd answers a keep-alive with "not found": on
// a held lease before its deadline on our own clock, etcd cannot have expired it, so it lost
// or rewound its state (or the lease was revoked by hand) and may have handed the slot on
// already (D18: stateLost, no grace); else the lease's loss as lateCause words it.
func (l *lease) notFoundCause() error {
	l.mu.Lock()
	holding, left := l.margin > 0, time.Until(l.confirmed.Add(l.ttl))
	l.mu.Unlock()
	if holding && left > 0 {
		return l.stateLost(fmt.Sprintf("it no longer knows lease %s, %v before its deadline (restarted on an empty data directory, restored from an older snapshot, or the lease was revoked by hand)", schema.FormatLeaseID(int64(l.id)), left.Round(time.Millisecond)))
	}
	return l.lateCause(ErrLeaseLost)
}

// stateLost is the lease's loss because etcd lost or rewound its state (why says how it
// showed): ErrLeaseLost and ErrStateLost together (D18).
func (l *lease) stateLost(why string) error {
	return fmt.Errorf("%w: %w: %s", ErrLeaseLost, ErrStateLost, why)
}

// clusterID is the ID of the etcd cluster that granted the lease (its answer's header),
// 0 if not known.
func (l *lease) clusterID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cluster
}

// ClusterID is the ID of the etcd cluster that granted the slot's lease (CONCH_CLUSTER_ID,
// D18), 0 if etcd did not say: with Rev it names the fencing token's epoch, since a store
// rebuilt with a new cluster token counts its revisions from 1 again.
func (h *Holder) ClusterID() uint64 { return h.l.clusterID() }
