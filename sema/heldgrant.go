// A slot taken already held after its run, for a node that is not running anything here: a
// reboot slot that a lock server grants on a node's behalf (D19). The check (the node holds
// none, a slot is free, the semaphore is not paused) and the write are one Txn.

package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TakeResult says what TakeHeld found or did.
type TakeResult int

const (
	// TakeGranted: a free slot was taken for the node, held after a run (Take.Slot).
	TakeGranted TakeResult = iota + 1
	// TakeAlreadyHeld: the node already held a slot after a run (Take.Slot): nothing was
	// written and its hold was not extended.
	TakeAlreadyHeld
	// TakeFull: every slot is taken (Take.Holders), or waiters are queued for them.
	TakeFull
	// TakePaused: the semaphore is paused (Take.Pause, D16): no new holder starts.
	TakePaused
)

// Take is TakeHeld's answer. Everything read from etcd in it is hostile input: escape it
// before printing.
type Take struct {
	Result  TakeResult
	Slot    HeldAfter // TakeGranted, TakeAlreadyHeld: the node's slot
	Holders []Holding // TakeFull: the holders, oldest first (at most max)
	Waiters int64     // TakeFull: keys queued behind the holders
	Pause   *Pause    // TakePaused: the pause in force
}

// Holding is one holder of a slot, as TakeHeld read it: its node, since when it holds, and
// for a slot held after a run (HeldAfter true) when it frees at the latest (Until, by the
// writer's clock); Until is zero for a supervised run, which holds until it ends.
type Holding struct {
	Key       string
	Rev       int64
	Node      string
	Since     time.Time
	Until     time.Time
	HeldAfter bool
	Via       string // Record.Via: who granted a slot held after no run of conch's ("" for a run)
}

// takeTries bounds TakeHeld's read-then-write rounds: each that fails did so because
// the queue changed between its read and its write, i.e. because another client won.
const takeTries = 8

// TakeHeld takes a slot of (name, max) for node, already held after a run (D13, D19), with
// no process behind it: a fresh lease of TTL hold (whole seconds, rounded up; etcd may
// raise it) that nobody keeps alive, and a key named after that lease whose record (rec,
// with Version, Host = node, State, Since, Ended and HeldUntil filled in) says held-after.
// The slot frees when the lease runs out or at ReleaseHeld(name, max, node) (D14).
//
// Rules, in order, from one read of the queue and the pause key: a node that already has a
// slot held after a run (its record's host) gets TakeAlreadyHeld, nothing written and its
// hold not extended; a paused semaphore gets TakePaused (D16); max keys or more (holders
// and waiters, conch runs included: one queue) get TakeFull; else the lease is granted and
// the key written by one Txn conditional on no key of the queue having been written since
// the read and on the pause key's absence. So two calls for one node, or two processes,
// never give the node two slots nor the semaphore max+1 holders: a lost race reads again
// (at most takeTries rounds; a round lost that often is ErrUnavailable). A lease granted
// for a write that did not happen is revoked.
//
// It blocks for its requests, bounded by ctx. Errors wrap ErrBadName, ErrBadMax or
// ErrBadNode for bad arguments (D4, D11a), ErrRefused when etcd rejects a request for
// good, else ErrUnavailable.
func TakeHeld(ctx context.Context, c *clientv3.Client, name string, max int, node string, hold time.Duration, rec Record) (Take, error) {
	if err := validateSem(name, max); err != nil {
		return Take{}, err
	}
	if err := ValidateNode(node); err != nil {
		return Take{}, err
	}
	prefix := Prefix(name, max)
	for range takeTries {
		t, rev, err := readTake(ctx, c, name, max, node)
		if err != nil || t.Result != 0 {
			return t, err
		}
		t, won, err := writeTake(ctx, c, name, max, node, hold, rec, rev)
		if err != nil || won {
			return t, err
		}
	}
	return Take{}, fmt.Errorf("%w: the queue of %s changed at each of %d tries", ErrUnavailable, prefix, takeTries)
}

// readTake reads the first max keys of the queue, its count and the pause in one Txn and
// decides from them (TakeHeld's rules): a Take with Result 0 means a slot is free, to be
// written with the read's revision rev as its condition.
func readTake(ctx context.Context, c *clientv3.Client, name string, max int, node string) (Take, int64, error) {
	prefix := Prefix(name, max)
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), byCreateAsc, clientv3.WithLimit(int64(max))),
		clientv3.OpGet(PauseKey(name, max)),
	).Commit()
	if err != nil {
		return Take{}, 0, etcdFailure("cannot read "+prefix, err)
	}
	first := resp.Responses[0].GetResponseRange()
	var holders []Holding
	for _, kv := range first.Kvs {
		h, r := holdingOf(kv)
		if h.HeldAfter && h.Node == node && !r.Newer {
			slot := heldAfterOf(h.Key, h.Rev, kv.Lease, r)
			return Take{Result: TakeAlreadyHeld, Slot: slot}, 0, nil
		}
		holders = append(holders, h)
	}
	if p := resp.Responses[1].GetResponseRange().Kvs; len(p) > 0 {
		pause := decodePause(p[0])
		return Take{Result: TakePaused, Pause: &pause}, 0, nil
	}
	if first.Count >= int64(max) {
		return Take{Result: TakeFull, Holders: holders, Waiters: first.Count - int64(len(holders))}, 0, nil
	}
	return Take{}, resp.Header.Revision, nil
}

// holdingOf reads one holder key.
func holdingOf(kv *mvccpb.KeyValue) (Holding, ReadRecord) {
	r := DecodeRecord(kv.Value)
	h := Holding{Key: string(kv.Key), Rev: kv.CreateRevision, Node: r.Host, Since: r.Since,
		HeldAfter: heldAfterRecord(r), Via: r.Via}
	if r.HeldSince != nil {
		h.Since = *r.HeldSince
	}
	if h.HeldAfter && r.HeldUntil != nil {
		h.Until = *r.HeldUntil
	}
	return h, r
}

// writeTake grants the hold's lease and writes the node's key on it, if no key of the queue
// was written after revision rev and the semaphore is not paused (one Txn). won is false
// when that condition failed (the lease is then revoked): read again.
func writeTake(ctx context.Context, c *clientv3.Client, name string, max int, node string, hold time.Duration, rec Record, rev int64) (t Take, won bool, err error) {
	prefix := Prefix(name, max)
	g, err := c.Grant(ctx, int64(RoundTTL(hold)/time.Second))
	if err != nil {
		return Take{}, false, etcdFailure("cannot grant the hold's lease for "+prefix, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	ttl := time.Duration(g.TTL) * time.Second
	until := now.Add(ttl)
	rec.Version, rec.Host, rec.State, rec.Since, rec.Ended, rec.HeldUntil = RecordVersion, node, StateHeldAfter, now, &now, &until
	key := leaseKey(prefix, g.ID)
	resp, err := c.Txn(ctx).If(
		// for every key of the queue: written at or before our read (a new key, or a
		// rewrite, fails it; a deletion only frees a slot)
		clientv3.Compare(clientv3.ModRevision(prefix).WithPrefix(), "<", rev+1),
		clientv3.Compare(clientv3.CreateRevision(PauseKey(name, max)), "=", 0),
	).Then(clientv3.OpPut(key, rec.encode(), clientv3.WithLease(g.ID))).Commit()
	if err == nil && resp.Succeeded {
		slot := HeldAfter{Key: key, Rev: resp.Header.Revision, Lease: g.ID, TTL: ttl, Node: node, Ended: now, Until: until}
		return Take{Result: TakeGranted, Slot: slot}, true, nil
	}
	// the lease has no key (or, when the Txn's answer was lost, perhaps one: a later read
	// finds it as the node's slot unless this revoke removes it, which only frees it)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, rerr := c.Revoke(rctx, g.ID); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) && err == nil {
		err = rerr
	}
	if err != nil {
		return Take{}, false, etcdFailure("cannot write a slot of "+prefix+" for "+node, err)
	}
	return Take{}, false, nil
}
