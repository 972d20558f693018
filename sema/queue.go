package sema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// queue runs one life of our key on lease l: enqueue, wait for our turn,
// become a holder (04_sema.md steps 1-4 with D1's wake-up rule). enqCtx
// bounds the enqueue (and the hold when the slot is free at once), ctx the
// wait.
// Errors: ErrNoSlot (Nonblock), ErrKeyDeleted, the lease's ErrLeaseLost or
// ErrFenced (from lease.hold at promotion), ctx's error, or etcd errors
// wrapping errEtcd.
func (s *Semaphore) queue(enqCtx, ctx context.Context, l *lease) (*Holder, error) {
	key := s.keyOf(l)
	rec := s.opts.Record
	rec.Version, rec.HeldSince = RecordVersion, nil
	myRev, r, err := s.claim(enqCtx, ctx, l, key, &rec)
	if err != nil {
		return nil, err
	}
	s.emit(Event{Kind: Enqueued, Rev: myRev, Lease: l.id, TTL: l.ttl, OtherCapacities: r.others, OtherKind: r.mixed})
	if r.held { // held at once: no rewrite, D2's three requests
		return s.newHolder(enqCtx, l, key, myRev, r.rev)
	}
	if s.opts.Nonblock {
		return nil, fmt.Errorf("%w in %s[%d]", ErrNoSlot, s.name, s.max)
	}
	ahead := r.rank - s.max
	for {
		var t turn
		if r.held {
			t = turnPromoted
		} else {
			s.emit(Event{Kind: Waiting, Ahead: ahead, Rev: myRev, Lease: l.id, TTL: l.ttl})
			if r.holders != nil {
				l.quicken() // next in line: keep the lease fresh for the hand-off
			}
			t = s.watchTurn(ctx, l, key, r)
		}
		switch t {
		case turnPromoted:
			now := time.Now().UTC().Truncate(time.Second)
			rec.HeldSince = &now
			var rev int64
			err := retryEtcd(ctx, l, func() (err error) { // a failed request must not cost our place
				rev, err = s.promote(ctx, key, myRev, l, rec.encode())
				return err
			})
			if err != nil {
				return nil, err
			}
			return s.newHolder(ctx, l, key, myRev, rev)
		case turnKeyDeleted:
			return nil, fmt.Errorf("%w: %s", ErrKeyDeleted, key)
		case turnLeaseLost:
			return nil, l.Err()
		case turnCtx:
			return nil, ctx.Err()
		}
		if r, err = s.rerankRetry(ctx, l, key, myRev); err != nil {
			return nil, err
		}
		switch {
		case r.rank >= 0:
			ahead = r.rank - s.max
		case ahead > 1: // behind the head: a key ahead of ours left
			ahead--
		}
	}
}

// claim writes our key and ranks it (D2), the first try bounded by enqCtx,
// later ones by ctx. With Spread, a key already there is this node's, held
// or waiting: "no slot free" for us (D11). With Nonblock claim then returns
// ErrNoSlot wrapping ErrNodeHasKey; otherwise it waits for that key's DELETE
// (Waiting event with NodeBusy) and tries again, at the back of the queue.
// Errors: those of enqueue, ErrKeyDeleted when a key of our fresh lease was
// there without Spread (someone wrote it), the lease's error, ctx's error.
func (s *Semaphore) claim(enqCtx, ctx context.Context, l *lease, key string, rec *Record) (int64, ranking, error) {
	for c := enqCtx; ; c = ctx {
		rec.Since = time.Now().UTC().Truncate(time.Second)
		myRev, r, err := s.enqueue(c, key, l, rec.encode())
		if !errors.Is(err, errKeyExists) {
			return myRev, r, err
		}
		if !s.opts.Spread {
			return 0, r, fmt.Errorf("%w: %s existed before we wrote it", ErrKeyDeleted, key)
		}
		if s.opts.Nonblock {
			return 0, r, fmt.Errorf("%w in %s[%d]: %w: %s", ErrNoSlot, s.name, s.max, ErrNodeHasKey, key)
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

// waitGone blocks until key is deleted (watched from rev+1, PUTs filtered
// server-side), the watch fails (after a pause of retryMin, so a failing
// watch does not spin), lease l is lost or ctx ends: turnRerank (look
// again), turnLeaseLost or turnCtx. The watch ends before it returns.
func (s *Semaphore) waitGone(ctx context.Context, l *lease, key string, rev int64) turn {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.c.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for {
		select {
		case wr, ok := <-wch:
			if ok && wr.Err() == nil && len(wr.Events) == 0 {
				continue // progress notification
			}
			if !ok || wr.Err() != nil {
				sleepCtx(ctx, retryMin)
			}
			return turnRerank
		case <-l.Done():
			return turnLeaseLost
		case <-ctx.Done():
			return turnCtx
		}
	}
}

// rerankRetry re-ranks, retrying etcd errors (see retryEtcd).
func (s *Semaphore) rerankRetry(ctx context.Context, l *lease, key string, myRev int64) (ranking, error) {
	var r ranking
	err := retryEtcd(ctx, l, func() (err error) {
		_, r, err = s.rerank(ctx, key, myRev)
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

type turn int

const (
	turnRerank     turn = iota // something ahead changed, or a watch failed: read again
	turnPromoted               // a holder left while we are the head (D1: no re-read)
	turnKeyDeleted             // our own key was deleted
	turnLeaseLost
	turnCtx
)

// watchTurn blocks until something can change our position. The head of the
// queue (rank == max) watches the max holder keys for DELETE: any one proves
// its promotion. Every other waiter watches only its predecessor, for DELETE
// or PUT (the PUT of a promoted head). So one release wakes at most two
// waiters whatever max and the queue length (D1). Every watch starts at the
// ranking read's revision + 1, so no event between read and watch is lost;
// a failed watch (ErrCompacted, leader lost) means re-rank. Our own key is
// watched for DELETE only (PUTs filtered server-side). The watch goroutines
// are cancelled and joined before watchTurn returns.
func (s *Semaphore) watchTurn(ctx context.Context, l *lease, key string, r ranking) turn {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	out := make(chan turn, 1)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	watch := func(k string, onEvent turn, opts ...clientv3.OpOption) {
		wch := s.c.Watch(wctx, k, append(opts, clientv3.WithRev(r.rev+1))...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := turnRerank
		loop:
			for wr := range wch {
				if wr.Err() != nil {
					break
				}
				if len(wr.Events) > 0 { // PUTs are filtered where they do not count
					res = onEvent
					break loop
				}
			}
			select {
			case out <- res:
			default:
			}
		}()
	}
	if r.holders != nil {
		for _, h := range r.holders {
			watch(h, turnPromoted, clientv3.WithFilterPut())
		}
	} else {
		watch(r.pred, turnRerank)
	}
	watch(key, turnKeyDeleted, clientv3.WithFilterPut())
	var t turn
	select {
	case t = <-out:
	case <-l.Done():
		t = turnLeaseLost
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return turnCtx
	}
	return t
}
