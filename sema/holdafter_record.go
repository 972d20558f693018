package sema

import (
	"time"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/mvccpb"
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

// HeldAfterOf is the HeldAfter that kv, a slot's key read from etcd, with its record r as
// decoded (schema.DecodeRecord), describes; TTL is left 0 (kv does not carry it).
func HeldAfterOf(kv *mvccpb.KeyValue, r schema.ReadRecord) HeldAfter {
	ha := HeldAfter{Key: string(kv.Key), Rev: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease), Node: r.Host}
	if r.Ended != nil {
		ha.Ended = *r.Ended
	}
	if r.HeldUntil != nil {
		ha.Until = *r.HeldUntil
	}
	return ha
}
