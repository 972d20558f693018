package sema

import (
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldAfterRecord reports whether a record read back says its slot is kept
// after the run ended (D13); an unreadable record says nothing.
func heldAfterRecord(r schema.ReadRecord) bool { return r.Err == nil && r.IsHeldAfter() }

// HeldAfter is a slot kept after its run ended (D13), as HoldAfter made it
// or the layer above freed it (internal/fleet). Everything but Key and Rev was
// read from etcd by that release: hostile input, to escape before printing.
type HeldAfter struct {
	Key   string
	Rev   int64            // create revision: the rank and the fencing token, unchanged by the hold
	Lease clientv3.LeaseID // the lease nobody keeps alive (0 when not known)
	TTL   time.Duration    // the hold's TTL as granted (whole seconds; 0 when not known)
	Node  string           // the node that ran (Record.Host)
	Ended time.Time        // when the run ended (zero when the record lacks it)
	Until time.Time        // Ended + TTL by the writer's clock (zero when unknown)
}

// heldAfterOf is the HeldAfter that the key created at rev, on lease, with
// record r describes.
func heldAfterOf(key string, rev, lease int64, r schema.ReadRecord) HeldAfter {
	ha := HeldAfter{Key: key, Rev: rev, Lease: clientv3.LeaseID(lease), Node: r.Host}
	if r.Ended != nil {
		ha.Ended = *r.Ended
	}
	if r.HeldUntil != nil {
		ha.Until = *r.HeldUntil
	}
	return ha
}
