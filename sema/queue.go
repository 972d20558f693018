package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// enqueueAndWait runs one life of our key on lease l: enqueue, wait for our turn,
// become a holder (04_sema.md steps 1-4 with D1's wake-up rule). enqCtx
// bounds the enqueue (and the hold when the slot is free at once), ctx the
// wait.
// Errors: ErrNoSlot (Nonblock), ErrKeyDeleted, the lease's ErrLeaseLost or
// ErrFenced (from lease.startFencing at promotion), ctx's error, or etcd errors
// wrapping errEtcd.
func (s *Semaphore) enqueueAndWait(enqCtx, ctx context.Context, l *lease) (*Holder, error) {
	key := s.keyOf(l)
	rec := s.opts.Record
	rec.Version, rec.HeldSince = schema.RecordVersion, nil
	myRev, r, err := s.writeKey(enqCtx, ctx, l, key, &rec)
	if err != nil {
		return nil, err
	}
	s.emit(Event{Kind: Enqueued, Ahead: r.rank, Rev: myRev, Lease: l.id, TTL: l.ttl, Cluster: l.clusterID(), OtherCapacities: r.others, OtherKind: r.mixed})
	if r.held { // held at once: no rewrite, D2's three requests
		return s.newHolder(enqCtx, l, heldKey{key: key, rev: myRev, seen: r.rev})
	}
	if s.opts.Nonblock {
		return nil, s.noSlot(r)
	}
	ahead := r.rank - s.max
	for {
		t, r2 := turnPromoted, r
		if !r.held {
			s.emitWaiting(Event{Kind: Waiting, Ahead: max(ahead, 0), Rev: myRev, Lease: l.id, TTL: l.ttl, Paused: r.pause, Unreachable: l.unreachable()})
			if r.holders != nil {
				l.useHoldCadence() // next in line: keep the lease fresh for the hand-off
			}
			t, r2 = s.watchTurn(ctx, l, key, myRev, r)
			s.doneWaiting()
		}
		if t == turnPromoted && !r2.held { // a holder's DELETE alone promoted us (D1), unconfirmed (D16b)
			t = s.pauseCheck(ctx, t) // D16: not while paused
		}
		switch t {
		case turnPromoted, turnClear:
			now := time.Now().UTC().Truncate(time.Second)
			rec.HeldSince = &now
			return s.newHolder(ctx, l, heldKey{key: key, rev: myRev, seen: r2.rev, held: rec.Encode()})
		case turnKeyDeleted: // D7d: after a stall, the lease's expiry, not a deletion
			return nil, l.goneErr(key)
		case turnLeaseLost:
			return nil, l.lostPlace(key, l.Err())
		case turnCtx:
			return nil, ctx.Err()
		case turnReranked: // D1a: the re-read is a ranking like any other
			r = r2
		default:
			if r, err = s.rerankRetry(ctx, l, key, myRev); err != nil {
				return nil, l.lostPlace(key, err)
			}
		}
		switch {
		case r.rank >= 0:
			ahead = r.rank - s.max
		case ahead > 1: // behind the head: a key ahead of ours left
			ahead--
		}
	}
}

// writeKey writes our key and ranks it (D2), the first try bounded by enqCtx,
// later ones by ctx. With Spread, a key already there is this node's, held
// or waiting: "no slot free" for us (D11). With Nonblock writeKey then returns
// ErrNoSlot wrapping errNodeHasKey; otherwise it waits for that key's DELETE
// (Waiting event with NodeBusy) and tries again, at the back of the queue.
// An enqueue whose answer was lost (an etcd error, no refusal) may have
// committed: enqueueAgain reads our key before writing again and keeps the
// place it took (D7j).
// Unless Options.AllowOtherCapacity, a key written while conch's keys of
// another capacity live under the name (the enqueue's count, same revision;
// for a key adopted after a lost answer, a read of the live capacities) makes
// a *CapacityError (ErrOtherCapacity), and the caller's revoke takes the key
// back (D17). Errors: those of enqueue, ErrKeyDeleted when a key of our fresh lease was
// there without Spread (someone wrote it), the lease's error, ctx's error.
func (s *Semaphore) writeKey(enqCtx, ctx context.Context, l *lease, key string, rec *schema.Record) (int64, ranking, error) {
	for c := enqCtx; ; c = ctx {
		rec.Since = time.Now().UTC().Truncate(time.Second)
		myRev, r, err := s.enqueue(c, key, l, rec.Encode())
		lost := answerLost(err) && ctx.Err() == nil
		if lost { // it may have committed: read before writing again
			c = ctx
			myRev, r, err = s.enqueueAgain(ctx, l, key, rec.Encode())
		}
		if err == nil && (r.others > 0 || lost) {
			// D17: keys under the name outside our capacity at our key's own revision. A
			// run racing us with another capacity sees ours in its Txn in turn, so at most
			// the first of two passes; the caller revokes our lease (our key goes) on error.
			if err := s.othersAreCapacities(c, &r); err != nil {
				return 0, r, err
			}
		}
		if !errors.Is(err, errKeyExists) {
			return myRev, r, err
		}
		if !s.opts.Spread {
			return 0, r, fmt.Errorf("%w: %s existed before we wrote it", ErrKeyDeleted, key)
		}
		if s.opts.Nonblock {
			return 0, r, fmt.Errorf("%w in %s[max=%d]: %w: %s", ErrNoSlot, s.name, s.max, errNodeHasKey, key)
		}
		s.emit(Event{Kind: Waiting, Ahead: 1, NodeBusy: true, Lease: l.id, TTL: l.ttl})
		switch s.waitGone(ctx, l, key, r.rev) {
		case turnLeaseLost:
			return 0, r, l.Err()
		case turnCtx:
			return 0, r, ctx.Err()
		}
	}
}

// rerankRetry re-ranks, retrying etcd errors (see retryEtcd), each try bounded by
// readTimeout.
func (s *Semaphore) rerankRetry(ctx context.Context, l *lease, key string, myRev int64) (ranking, error) {
	var r ranking
	err := retryEtcd(ctx, l, func() (err error) {
		rctx, cancel := context.WithTimeout(ctx, readTimeout) // a silent member is not waited for (D7b (3))
		defer cancel()
		r, err = s.rerank(rctx, key, myRev)
		return err
	})
	return r, err
}

// retryEtcd runs op until it returns nil or an error other than a failed
// etcd request (errEtcd), backing off between tries from retryMin to
// retryMax while ctx and lease l live. It returns op's last error, or the
// lease's error (ErrLeaseLost, ErrFenced) once the lease is gone. Only
// for requests that are safe to repeat: reads, and writes conditional on
// our key's create revision.
func retryEtcd(ctx context.Context, l *lease, op func() error) error {
	backoff := retryMin
	for {
		err := op()
		if err == nil || !errors.Is(err, errEtcd) {
			return err
		}
		select {
		case <-l.Done():
			return l.Err()
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, retryMax)
	}
}
