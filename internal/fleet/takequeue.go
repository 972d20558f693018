// A place in the queue kept for a node that polls (D19a): a lock server that refuses a node
// keeps a key for it in the semaphore's queue, on a lease it refreshes at each of the node's
// requests, and turns that key into the node's slot once it ranks below the capacity.

package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// stateQueued is schema.Record.State of a place in the queue kept for a node by a lock server
// (D19a): ranked like any waiter's key, bound to a lease the server refreshes at each of
// the node's requests, so it goes when the node stops asking.
const stateQueued = "queued"

// TakeHeldQueued is TakeHeld with first come, first served across nodes that poll (D19a).
// From one read of the whole queue and the pause key: the node's slot held after a run is
// TakeAlreadyHeld, as with TakeHeld; then, as with TakeHeld, conch's keys of another
// capacity under the name are TakeOtherCapacity (D17). The node's place (a key whose record says stateQueued
// and names node) is refreshed (its lease's TTL starts again) and, when fewer than max keys
// are ahead of it and the semaphore is not paused, rebound to a fresh lease of TTL hold and
// rewritten as the node's slot held after a run (one Txn, conditional on the key being the
// one read; the rank, which only falls, keeps the capacity): TakeGranted. With no place and
// fewer than max keys, the slot is taken as TakeHeld takes it. Any other answer (TakePaused,
// TakeFull with Ahead) leaves the node a place: its own, refreshed, or a new key at the back
// on a lease of TTL wait, written by a Txn conditional on the queue as read. Blocking and
// errors as TakeHeld's.
func TakeHeldQueued(ctx context.Context, c *clientv3.Client, name string, max int, node string, hold, wait time.Duration, rec schema.Record) (Take, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return Take{}, err
	}
	if err := schema.ValidateNode(node); err != nil {
		return Take{}, err
	}
	tk := taker{c: c, name: name, max: max, node: node, prefix: schema.Prefix(name, max)}
	for range takeTries {
		t, done, err := tk.queuedRound(ctx, hold, wait, rec)
		if err != nil || done {
			return t, err
		}
	}
	return Take{Result: TakeFull, Contended: true}, nil
}

// queuedRound is one read and the write it leads to; done is false when the write's
// condition failed (the queue changed): read again.
func (tk taker) queuedRound(ctx context.Context, hold, wait time.Duration, rec schema.Record) (Take, bool, error) {
	below, above := tk.outside()
	resp, err := tk.c.Txn(ctx).Then(
		clientv3.OpGet(tk.prefix, clientv3.WithPrefix(), byCreateAsc),
		clientv3.OpGet(schema.PauseKey(tk.name, tk.max)),
		clientv3.OpGet(below[0], clientv3.WithRange(below[1]), clientv3.WithCountOnly()),
		clientv3.OpGet(above[0], clientv3.WithRange(above[1]), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return Take{}, false, sema.EtcdFailure("cannot read "+tk.prefix, err)
	}
	all := resp.Responses[0].GetResponseRange().Kvs
	mine := -1
	var holders []Holding
	for i, kv := range all {
		h, r := holdingOf(kv)
		if h.HeldAfter && h.Node == tk.node && !r.Newer {
			return Take{Result: TakeAlreadyHeld, Slot: sema.HeldAfterOf(kv, r)}, true, nil
		}
		if r.Err == nil && r.State == stateQueued && r.Host == tk.node && mine < 0 {
			mine = i
		}
		if i < tk.max {
			holders = append(holders, h)
		}
	}
	others := resp.Responses[2].GetResponseRange().Count + resp.Responses[3].GetResponseRange().Count
	if t, err := tk.capacity(ctx, Take{others: others}); err != nil || t.Result != 0 {
		return t, true, err // D17: another capacity is live under the name
	}
	var pause *schema.Pause
	if p := resp.Responses[1].GetResponseRange().Kvs; len(p) > 0 {
		dp := schema.DecodePause(p[0])
		pause = &dp
	}
	refused := func(ahead int) Take {
		if pause != nil {
			return Take{Result: TakePaused, Pause: pause, Ahead: ahead}
		}
		return Take{Result: TakeFull, Holders: holders, Waiters: int64(len(all) - len(holders)), Ahead: ahead}
	}
	switch {
	case mine >= 0 && (mine >= tk.max || pause != nil):
		return refused(mine), true, tk.refresh(ctx, all[mine])
	case mine >= 0:
		t, won, err := tk.promoteQueued(ctx, all[mine], hold, rec)
		return t, won, err
	case len(all) < tk.max && pause == nil:
		g, err := tk.c.Grant(ctx, int64(sema.RoundTTL(hold)/time.Second))
		if err != nil {
			return Take{}, false, sema.EtcdFailure("cannot grant the hold's lease for "+tk.prefix, err)
		}
		t, won, _, err := tk.write(ctx, g, rec, resp.Header.Revision)
		if !won {
			tk.revoke(ctx, g.ID, &err)
		}
		return t, won, err
	}
	won, err := tk.enqueue(ctx, wait, rec, resp.Header.Revision)
	return refused(len(all)), won, err
}

// refresh starts the TTL of a place's lease again (the node asked again).
func (tk taker) refresh(ctx context.Context, kv *mvccpb.KeyValue) error {
	if _, err := tk.c.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return sema.EtcdFailure(fmt.Sprintf("cannot refresh the place %s", kv.Key), err)
	}
	return nil
}

// enqueue writes a place for the node at the back of the queue, on a fresh lease of TTL
// wait, if no key of the queue was written after rev (else won is false: read again).
func (tk taker) enqueue(ctx context.Context, wait time.Duration, rec schema.Record, rev int64) (won bool, err error) {
	g, err := tk.c.Grant(ctx, int64(sema.RoundTTL(wait)/time.Second))
	if err != nil {
		return false, sema.EtcdFailure("cannot grant a place's lease in "+tk.prefix, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	rec.Version, rec.Host, rec.State, rec.Since, rec.Ended, rec.HeldUntil = schema.RecordVersion, tk.node, stateQueued, now, nil, nil
	resp, err := tk.c.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(tk.prefix).WithPrefix(), "<", rev+1),
	).Then(clientv3.OpPut(schema.LeaseKey(tk.prefix, g.ID), rec.Encode(), clientv3.WithLease(g.ID))).Commit()
	if err == nil && resp.Succeeded {
		return true, nil
	}
	if err != nil {
		err = sema.EtcdFailure("cannot write a place in "+tk.prefix+" for "+tk.node, err)
	}
	tk.revoke(ctx, g.ID, &err)
	return false, err
}

// promoteQueued rewrites the node's place kv (ranked below the capacity) as its slot held
// after a run, on a fresh lease of TTL hold, if kv is unchanged and the semaphore not
// paused; then revokes the place's lease, which has no key any more (best effort: it
// expires after its TTL anyway). won is false when the condition failed: read again.
func (tk taker) promoteQueued(ctx context.Context, kv *mvccpb.KeyValue, hold time.Duration, rec schema.Record) (Take, bool, error) {
	g, err := tk.c.Grant(ctx, int64(sema.RoundTTL(hold)/time.Second))
	if err != nil {
		return Take{}, false, sema.EtcdFailure("cannot grant the hold's lease for "+tk.prefix, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	ttl := time.Duration(g.TTL) * time.Second
	until := now.Add(ttl)
	rec.Version, rec.Host, rec.State, rec.Since, rec.Ended, rec.HeldUntil = schema.RecordVersion, tk.node, schema.StateHeldAfter, now, &now, &until
	key := string(kv.Key)
	resp, err := tk.c.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision),
		clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
		clientv3.Compare(clientv3.CreateRevision(schema.PauseKey(tk.name, tk.max)), "=", 0),
	).Then(clientv3.OpPut(key, rec.Encode(), clientv3.WithLease(g.ID))).Commit()
	if err != nil || !resp.Succeeded {
		if err != nil {
			err = sema.EtcdFailure("cannot turn the place "+key+" into a slot", err)
		}
		tk.revoke(ctx, g.ID, &err)
		return Take{}, false, err
	}
	var none error
	tk.revoke(ctx, clientv3.LeaseID(kv.Lease), &none) // the place's lease: keyless now
	slot := sema.HeldAfter{Key: key, Rev: kv.CreateRevision, Lease: g.ID, TTL: ttl, Node: tk.node, Ended: now, Until: until}
	return Take{Result: TakeGranted, Slot: slot}, true, nil
}

// DropQueued deletes the places kept for node in (name, max) (D19a: a node that says it is
// up again no longer waits), each conditional on its modification revision as read. It
// returns how many it deleted. Errors wrap schema.ErrBadName or schema.ErrBadMax for bad
// arguments, sema.ErrRefused when etcd rejects a request, else sema.ErrUnavailable.
func DropQueued(ctx context.Context, c *clientv3.Client, name string, max int, node string) (int, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return 0, err
	}
	resp, err := c.Get(ctx, schema.Prefix(name, max), clientv3.WithPrefix())
	if err != nil {
		return 0, sema.EtcdFailure("cannot list "+schema.Prefix(name, max), err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		r := schema.DecodeRecord(kv.Value)
		if r.Err != nil || r.State != stateQueued || r.Host != node {
			continue
		}
		dr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return n, sema.EtcdFailure(fmt.Sprintf("cannot delete %s", kv.Key), err)
		}
		if dr.Succeeded {
			n++
		}
	}
	return n, nil
}
