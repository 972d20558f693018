package sema

import (
	"context"
	"errors"
	"fmt"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errEtcd marks an etcd request that failed (as opposed to a decision of the
// recipe), so rerankRetry retries it and Acquire retries the whole key.
var errEtcd = errors.New("etcd request failed")

// errKeyExists: the enqueue's put-if-absent found our key already there. With
// Spread that is this node's key, held or waiting (D11); ranking.rev is then
// the revision of that read.
var errKeyExists = errors.New("key exists")

// ranking is what one ranking read tells us about our key.
type ranking struct {
	rev     int64         // header revision of the read: watches start at rev+1 (D1)
	rank    int           // exact 0-based rank, or -1 when only "behind the head" is known
	held    bool          // fewer than max keys are ahead of ours
	holders []string      // head of the queue only: the max keys ahead of ours
	pred    string        // other waiters: the key just ahead of ours
	predMod int64         // mod revision of pred at rev: a later one is a PUT (D1a re-read)
	others  int64         // keys under the same name with another capacity (D6)
	mixed   int           // keys of the other kind (lease / node suffix) among those read (D11)
	pause   *schema.Pause // the semaphore's pause, read in the same Txn (D16); nil: not paused
	paused  bool          // fewer than max keys are ahead, but the pause keeps ours waiting (D16)
}

// enqPause is the index of the pause read's answer (pauseOp) among the enqueue
// Txn's: after the put and the four ranking reads, before the node-wait
// marker's ops (nodeWaitOps), which only Spread adds.
const enqPause = 5

var (
	byCreateAsc  = clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	byCreateDesc = clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)
)

// enqueue writes our key and ranks it in one Txn (D2): put-if-absent bound to
// the lease, the count of keys (ours is the newest, so rank = count-1), the
// first max keys, the two newest keys (ours and our predecessor), the count
// under the whole name and the pause key (D16). It returns O(max) keys, never
// the whole queue. With Spread it also keeps the node-wait marker
// (nodeWaitOps), whose ops come after the pause read.
func (s *Semaphore) enqueue(ctx context.Context, key string, l *lease, value string) (myRev int64, r ranking, err error) {
	waitThen, waitElse := s.nodeWaitOps(l, value) // Spread: list a waiter for its node's key
	resp, err := s.c.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(append([]clientv3.Op{
		clientv3.OpPut(key, value, clientv3.WithLease(l.id)),
		clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), byCreateAsc, clientv3.WithLimit(int64(s.max))),
		clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), byCreateDesc, clientv3.WithLimit(2)),
		clientv3.OpGet(schema.NamePrefix(s.name), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		s.pauseOp(), // D16: Responses[enqPause], see withPause
	}, waitThen...)...).Else(waitElse...).Commit()
	if err == nil {
		err = s.seams.answered(key) // a test may lose the answer here
	}
	if err != nil {
		return 0, r, fmt.Errorf("%w: cannot enqueue %s: %w", errEtcd, key, err)
	}
	if !resp.Succeeded { // with Spread: this node has a key; else someone wrote our fresh lease's key
		return 0, ranking{rev: resp.Header.Revision}, fmt.Errorf("%w: %s", errKeyExists, key)
	}
	myRev = resp.Header.Revision
	count := resp.Responses[1].GetResponseRange().Count
	first := resp.Responses[2].GetResponseRange().Kvs
	newest := resp.Responses[3].GetResponseRange().Kvs
	r = ranking{rev: myRev, rank: int(count - 1)}
	r.others = resp.Responses[4].GetResponseRange().Count - count
	r.mixed = s.otherKind(ctx, key, first, newest)
	switch {
	case r.rank < s.max:
		r.held = true
	case r.rank == s.max:
		for _, kv := range first {
			r.holders = append(r.holders, string(kv.Key))
		}
	default:
		if len(newest) != 2 || string(newest[0].Key) != key { // cannot happen: our put is the Txn's newest key
			return 0, r, fmt.Errorf("%w: %s is not the newest key under %s", errEtcd, key, s.prefix)
		}
		r.pred, r.predMod = string(newest[1].Key), newest[1].ModRevision
	}
	return myRev, withPause(r, resp, enqPause), nil
}

// rerank re-reads our position (04_sema.md step 2) in a read-only Txn that fails if our key
// is gone: the first max+1 keys by create revision, O(max) keys returned. When ours is among
// them (a holder, or the head: the waiter a promotion wakes, on the hand-off's path) that one
// sorted read is the ranking; otherwise a second Txn reads the first max+1 keys and our
// predecessor at one revision (rerankDeep). etcd reads and sorts the whole queue for each
// sorted read (it has no index by create revision), so the head's re-read costs it one such
// read instead of two. Errors: ErrKeyDeleted, or an etcd error.
func (s *Semaphore) rerank(ctx context.Context, key string, myRev int64) (ranking, error) {
	resp, err := s.whileOurs(ctx, key, myRev, s.firstKeys(), s.pauseOp())
	if err != nil {
		return ranking{}, err
	}
	if r, found := s.rankAmongFirst(key, resp); found {
		return withPause(r, resp, 1), nil
	}
	return s.rerankDeep(ctx, key, myRev)
}

// rerankDeep is rerank for a key behind the head: the first max+1 keys and our predecessor,
// read in one Txn, so both are of one revision. Errors as rerank's.
func (s *Semaphore) rerankDeep(ctx context.Context, key string, myRev int64) (ranking, error) {
	resp, err := s.whileOurs(ctx, key, myRev, s.firstKeys(),
		clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), byCreateDesc, clientv3.WithLimit(1), clientv3.WithMaxCreateRev(myRev-1)),
		s.pauseOp())
	if err != nil {
		return ranking{}, err
	}
	r, found := s.rankAmongFirst(key, resp)
	if found {
		return withPause(r, resp, 2), nil
	}
	pred := resp.Responses[1].GetResponseRange().Kvs
	if len(pred) != 1 { // cannot happen: max+1 keys are ahead of ours
		return r, fmt.Errorf("%w: no predecessor for %s", errEtcd, key)
	}
	r.pred, r.predMod = string(pred[0].Key), pred[0].ModRevision
	return withPause(r, resp, 2), nil
}

// firstKeys reads the first max+1 keys of the queue by create revision, keys only.
func (s *Semaphore) firstKeys() clientv3.Op {
	return clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), byCreateAsc, clientv3.WithLimit(int64(s.max+1)))
}

// whileOurs runs the read-only ops in one Txn that succeeds only while key is the one we
// created at myRev. Errors: ErrKeyDeleted when it is not, or an etcd error (errEtcd).
func (s *Semaphore) whileOurs(ctx context.Context, key string, myRev int64, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", myRev)).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read the queue of %s: %w", errEtcd, key, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: %s", ErrKeyDeleted, key)
	}
	return resp, nil
}

// rankAmongFirst ranks key by resp's first answer, the first max+1 keys by create revision:
// found is false when key is not among them (then only rev and rank -1 are set).
func (s *Semaphore) rankAmongFirst(key string, resp *clientv3.TxnResponse) (r ranking, found bool) {
	r = ranking{rev: resp.Header.Revision, rank: -1}
	first := resp.Responses[0].GetResponseRange().Kvs
	for i, kv := range first {
		if string(kv.Key) != key {
			continue
		}
		r.rank = i
		if i < s.max {
			r.held = true
			return r, true
		}
		for _, h := range first[:s.max] {
			r.holders = append(r.holders, string(h.Key))
		}
		return r, true
	}
	return r, false
}

// predUnchanged reports whether our predecessor in r (a waiter behind the head) is still there
// and not rewritten since r was read, in one read-only Txn of two keys that fails if our own
// key, created at myRev, is gone (D1a's re-read for such a waiter). Errors: ErrKeyDeleted, or
// an etcd error.
func (s *Semaphore) predUnchanged(ctx context.Context, key string, myRev int64, r ranking) (bool, error) {
	resp, err := s.whileOurs(ctx, key, myRev, clientv3.OpGet(r.pred, clientv3.WithKeysOnly()))
	if err != nil {
		return false, err
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	return len(kvs) == 1 && kvs[0].ModRevision <= r.rev, nil
}

// promote rewrites our key as HELD, keeping its lease, only if it is still
// the key we created (D1). The PUT wakes the waiter behind us. It returns the
// revision of the write. Errors: ErrKeyDeleted, or an etcd error.
func (s *Semaphore) promote(ctx context.Context, key string, myRev int64, l *lease, value string) (int64, error) {
	resp, err := s.c.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", myRev),
	).Then(
		clientv3.OpPut(key, value, clientv3.WithLease(l.id)),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("%w: cannot mark %s held: %w", errEtcd, key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s", ErrKeyDeleted, key)
	}
	return resp.Header.Revision, nil
}

// moved reports whether what a waiter ranked by r watches changed by the
// later ranking r2 of the same key (D1a's re-read): it is promoted, it
// became or stopped being the head, its predecessor left, or its
// predecessor was rewritten (the PUT of a promoted head) after r was read,
// or, at the head, the pause came or went (the head follows it, D16b).
// Keys are never added ahead of ours, so at the head the holders are
// unchanged exactly when it is still the head.
func moved(r, r2 ranking) bool {
	pauseMoved := r2.holders != nil && (r.pause == nil) != (r2.pause == nil)
	return r2.held || (r.holders != nil) != (r2.holders != nil) || r2.pred != r.pred || r2.predMod > r.rev || r.paused != r2.paused || pauseMoved
}
