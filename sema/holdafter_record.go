package sema

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StateHeldAfter is Record.State of a key kept after its run ended (D13):
// bound to a lease nobody keeps alive, it frees when that lease expires or
// at the release of the node's held slots (D14).
const StateHeldAfter = "held-after"

// ViaFleetLock is Record.Via of a reboot slot granted by a FleetLock server (D19).
const ViaFleetLock = "fleetlock"

// decodeHeldAfter reads the fields a slot held after its run adds to the
// record (D13) with DecodeRecord's field reader, so a bad one is named in
// r.Bad like any other.
func decodeHeldAfter(r *ReadRecord, field func(string, any, func() bool) bool) {
	var ended, until time.Time
	field("state", &r.State, func() bool { return true })
	field("via", &r.Via, func() bool { return true })
	if field("ended", &ended, func() bool { return renderable(ended) }) {
		e := ended.UTC()
		r.Ended = &e
	}
	if field("held_until", &until, func() bool { return renderable(until) }) {
		u := until.UTC()
		r.HeldUntil = &u
	}
}

// IsHeldAfter reports whether the record says its slot is kept after the
// run ended (D13): state StateHeldAfter.
func (r Record) IsHeldAfter() bool { return r.State == StateHeldAfter }

// heldAfterRecord reports whether a record read back says its slot is kept
// after the run ended (D13); an unreadable record says nothing.
func heldAfterRecord(r ReadRecord) bool { return r.Err == nil && r.IsHeldAfter() }

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
func heldAfterOf(key string, rev, lease int64, r ReadRecord) HeldAfter {
	ha := HeldAfter{Key: key, Rev: rev, Lease: clientv3.LeaseID(lease), Node: r.Host}
	if r.Ended != nil {
		ha.Ended = *r.Ended
	}
	if r.HeldUntil != nil {
		ha.Until = *r.HeldUntil
	}
	return ha
}
