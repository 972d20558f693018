// A slot taken already held after its run, for a node that is not running anything here: a
// reboot slot that a lock server grants on a node's behalf (D19). The check (the node holds
// none, a slot is free, the semaphore is not paused) and the write are one Txn.

package fleet

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
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
	// TakeOtherCapacity: the name has conch's keys under other capacities (Take.Capacities,
	// D17): a slot of this one would run beside them. Nothing was written.
	TakeOtherCapacity
)

// Take is TakeHeld's answer. Everything read from etcd in it is hostile input: escape it
// before printing.
type Take struct {
	Result  TakeResult
	Slot    sema.HeldAfter // TakeGranted, TakeAlreadyHeld: the node's slot
	Holders []Holding      // TakeFull: the holders, oldest first (at most max)
	Waiters int64          // TakeFull: keys queued behind the holders
	Pause   *schema.Pause  // TakePaused: the pause in force
	// Ahead is, for a refusal by TakeHeldQueued, the number of keys ahead of the node's
	// place in the queue (D19a).
	Ahead int
	// Contended is set with TakeFull when a slot was free at each read but others took
	// it first every time (takeTries rounds): Holders is then empty.
	Contended bool
	// Capacities are, for TakeOtherCapacity, the capacities with conch's keys under the
	// name, ascending, this one excluded (D17).
	Capacities []int

	others int64 // keys under the name outside this capacity's prefix, at the read
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
	Via       string // schema.Record.Via: who granted a slot held after no run of conch's ("" for a run)
	Queued    bool   // a place kept for a node that polls (D19a), reserved for it
}

// takeTries bounds TakeHeld's write rounds: each that fails does so because the queue
// changed between its read and its write, i.e. because another client took a slot first.
const takeTries = 16

// TakeHeld takes a slot of (name, max) for node, already held after a run (D13, D19), with
// no process behind it: a fresh lease of TTL hold (whole seconds, rounded up; etcd may
// raise it) that nobody keeps alive, and a key named after that lease whose record (rec,
// with Version, Host = node, State, Since, Ended and HeldUntil filled in) says held-after.
// The slot frees when the lease runs out or when the layer above frees the node's held slots (D14, internal/fleet's ReleaseHeld).
//
// Rules, in order, from one read of the queue, the pause key and the rest of the name: a
// node that already has a slot held after a run (its record's host) gets TakeAlreadyHeld,
// nothing written and its hold not extended; a name with conch's keys under another
// capacity gets TakeOtherCapacity (D17: keys outside the capacity's prefix are looked at
// with sema.LiveCapacities, so foreign keys, D6g, refuse nothing); a paused semaphore gets
// TakePaused (D16); max keys or more (holders and waiters, conch runs included: one queue)
// get TakeFull; else the key is written by one Txn conditional on no key of the name
// having been written since that read and on the pause key's absence, whose other branch
// reads again. So two calls for one node, or two processes, never give the node two slots
// nor the semaphore max+1 holders, and a run of another capacity that enqueues meanwhile
// either counts this key (D17: refused) or makes the write fail and be decided again.
// A write that loses to other writers takeTries times in a row (slots taken as fast as
// they free) gets TakeFull with Contended set. A lease granted for a write that did not
// happen is revoked.
//
// It blocks for its requests, bounded by ctx. Errors wrap schema.ErrBadName, schema.ErrBadMax or
// schema.ErrBadNode for bad arguments (D4, D11a), sema.ErrRefused when etcd rejects a request for
// good, else sema.ErrUnavailable.
func TakeHeld(ctx context.Context, c *clientv3.Client, name string, max int, node string, hold time.Duration, rec schema.Record) (Take, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return Take{}, err
	}
	if err := schema.ValidateNode(node); err != nil {
		return Take{}, err
	}
	tk := taker{c: c, name: name, max: max, node: node, prefix: schema.Prefix(name, max)}
	resp, err := c.Txn(ctx).Then(tk.reads()...).Commit()
	if err != nil {
		return Take{}, sema.EtcdFailure("cannot read "+tk.prefix, err)
	}
	t, err := tk.capacity(ctx, tk.decide(resp.Responses))
	if err != nil || t.Result != 0 {
		return t, err
	}
	g, err := c.Grant(ctx, int64(sema.RoundTTL(hold)/time.Second))
	if err != nil {
		return Take{}, sema.EtcdFailure("cannot grant the hold's lease for "+tk.prefix, err)
	}
	rev := resp.Header.Revision
	for range takeTries {
		var won bool
		t, won, rev, err = tk.write(ctx, g, rec, rev)
		if err == nil && !won {
			t, err = tk.capacity(ctx, t)
		}
		if err != nil || won || t.Result != 0 {
			break
		}
	}
	if t.Result == 0 && err == nil { // lost every round
		t = Take{Result: TakeFull, Contended: true}
	}
	if t.Result != TakeGranted {
		tk.revoke(ctx, g.ID, &err)
	}
	if err != nil {
		return Take{}, err
	}
	return t, nil
}

// taker is one TakeHeld call's fixed arguments.
type taker struct {
	c      *clientv3.Client
	name   string
	max    int
	node   string
	prefix string
}

// reads are the queue's first max keys (with the count of all), the pause key, and the
// counts of the name's keys before and after the capacity's prefix (D17).
func (tk taker) reads() []clientv3.Op {
	below, above := tk.outside()
	return []clientv3.Op{
		clientv3.OpGet(tk.prefix, clientv3.WithPrefix(), byCreateAsc, clientv3.WithLimit(int64(tk.max))),
		clientv3.OpGet(schema.PauseKey(tk.name, tk.max)),
		clientv3.OpGet(below[0], clientv3.WithRange(below[1]), clientv3.WithCountOnly()),
		clientv3.OpGet(above[0], clientv3.WithRange(above[1]), clientv3.WithCountOnly()),
	}
}

// outside returns the two key ranges [from, end) of the name that are not the capacity's
// prefix: other capacities' keys and foreign keys (D6g) live there.
func (tk taker) outside() (below, above [2]string) {
	np, end := schema.NamePrefix(tk.name), clientv3.GetPrefixRangeEnd(tk.prefix)
	return [2]string{np, tk.prefix}, [2]string{end, clientv3.GetPrefixRangeEnd(np)}
}

// capacity applies D17 to t, decided from a read that found t.others keys outside the
// capacity's prefix: when some are conch's keys of other capacities (sema.CheckCapacity), a
// Take of TakeOtherCapacity; else t. A node that already holds here keeps its answer.
// Errors as sema.CheckCapacity's.
func (tk taker) capacity(ctx context.Context, t Take) (Take, error) {
	if t.others == 0 || t.Result == TakeAlreadyHeld {
		return t, nil
	}
	var ce *sema.CapacityError
	switch err := sema.CheckCapacity(ctx, tk.c, tk.name, tk.max); {
	case errors.As(err, &ce):
		return Take{Result: TakeOtherCapacity, Capacities: ce.Live}, nil
	case err != nil:
		return Take{}, err
	}
	return t, nil
}

// decide applies TakeHeld's rules to the answers of reads: a Take with Result 0 means a
// slot is free.
func (tk taker) decide(rs []*etcdserverpb.ResponseOp) Take {
	t := tk.decideQueue(rs)
	t.others = rs[2].GetResponseRange().Count + rs[3].GetResponseRange().Count
	return t
}

// decideQueue is decide without the rest of the name.
func (tk taker) decideQueue(rs []*etcdserverpb.ResponseOp) Take {
	first := rs[0].GetResponseRange()
	var holders []Holding
	for _, kv := range first.Kvs {
		h, r := holdingOf(kv)
		if h.HeldAfter && h.Node == tk.node && !r.Newer {
			return Take{Result: TakeAlreadyHeld, Slot: sema.HeldAfterOf(kv, r)}
		}
		holders = append(holders, h)
	}
	if p := rs[1].GetResponseRange().Kvs; len(p) > 0 {
		pause := schema.DecodePause(p[0])
		return Take{Result: TakePaused, Pause: &pause}
	}
	if first.Count >= int64(tk.max) {
		return Take{Result: TakeFull, Holders: holders, Waiters: first.Count - int64(len(holders))}
	}
	return Take{}
}

// write puts the node's key on lease g if no key of the queue was written after revision
// rev and the semaphore is not paused (one Txn), else reads the queue again in the same
// Txn and decides from it: won, or the new decision (Result 0: a slot is still free, try
// again at next).
func (tk taker) write(ctx context.Context, g *clientv3.LeaseGrantResponse, rec schema.Record, rev int64) (t Take, won bool, next int64, err error) {
	now := time.Now().UTC().Truncate(time.Second)
	ttl := time.Duration(g.TTL) * time.Second
	until := now.Add(ttl)
	rec.Version, rec.Host, rec.State, rec.Since, rec.Ended, rec.HeldUntil = schema.RecordVersion, tk.node, schema.StateHeldAfter, now, &now, &until
	key := schema.LeaseKey(tk.prefix, g.ID)
	below, above := tk.outside()
	resp, err := tk.c.Txn(ctx).If(
		// for every key of the queue: written at or before our read (a new key, or a
		// rewrite, fails it; a deletion only frees a slot)
		clientv3.Compare(clientv3.ModRevision(tk.prefix).WithPrefix(), "<", rev+1),
		clientv3.Compare(clientv3.CreateRevision(schema.PauseKey(tk.name, tk.max)), "=", 0),
		// likewise for the rest of the name: another capacity's new key fails it (D17)
		clientv3.Compare(clientv3.ModRevision(below[0]).WithRange(below[1]), "<", rev+1),
		clientv3.Compare(clientv3.ModRevision(above[0]).WithRange(above[1]), "<", rev+1),
	).Then(clientv3.OpPut(key, rec.Encode(), clientv3.WithLease(g.ID))).Else(tk.reads()...).Commit()
	if err != nil {
		return Take{}, false, 0, sema.EtcdFailure("cannot write a slot of "+tk.prefix+" for "+tk.node, err)
	}
	if resp.Succeeded {
		slot := sema.HeldAfter{Key: key, Rev: resp.Header.Revision, Lease: g.ID, TTL: ttl, Node: tk.node, Ended: now, Until: until}
		return Take{Result: TakeGranted, Slot: slot}, true, 0, nil
	}
	return tk.decide(resp.Responses), false, resp.Header.Revision, nil
}

// revoke revokes the lease of a write that did not happen (it has no key), within a fresh
// bounded context; its failure is joined to *err only when there is no other error (the
// lease then expires on its own).
func (tk taker) revoke(ctx context.Context, id clientv3.LeaseID, err *error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, rerr := tk.c.Revoke(rctx, id); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) && *err == nil {
		*err = sema.EtcdFailure("cannot revoke an unused lease of "+tk.prefix, rerr)
	}
}

// holdingOf reads one holder key.
func holdingOf(kv *mvccpb.KeyValue) (Holding, schema.ReadRecord) {
	r := schema.DecodeRecord(kv.Value)
	h := Holding{Key: string(kv.Key), Rev: kv.CreateRevision, Node: r.Host, Since: r.Since,
		HeldAfter: r.Err == nil && r.IsHeldAfter(), Via: r.Via, Queued: r.Err == nil && r.State == stateQueued}
	if r.HeldSince != nil {
		h.Since = *r.HeldSince
	}
	if h.HeldAfter && r.HeldUntil != nil {
		h.Until = *r.HeldUntil
	}
	return h, r
}

// byCreateAsc sorts a range read by create revision, oldest first: the queue's order (D6).
var byCreateAsc = clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)

// cleanupTimeout bounds the revoke of a lease granted for a write that did not happen, as
// sema bounds its own clean-up requests.
const cleanupTimeout = 5 * time.Second
