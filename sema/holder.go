package sema

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Holder is a held slot. Its Context ends when the slot is lost, and
// context.Cause tells why (D7): ErrLeaseLost, ErrFenced (the lease could not
// be confirmed alive before deadline - FenceMargin), ErrKeyDeleted, or
// ErrReleased after Release. The caller must call Release exactly once.
type Holder struct {
	s      *Semaphore
	l      *lease
	key    string
	rev    int64
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   context.CancelFunc
	wg     sync.WaitGroup
	// overwritten: someone put our key without our lease (D7); Release
	// must then delete it explicitly
	overwritten atomic.Bool
}

// heldKey is our key as the queue hands it to newHolder.
type heldKey struct {
	key  string
	rev  int64 // create revision: the fencing token
	seen int64 // a revision at which the key is known to be ours
	// held is the HELD record a promoted waiter still has to write (D1), beside
	// the caller's work; "" when the key needs no rewrite (held at once, D2).
	held string
}

// newHolder switches the lease to the holding cadence (see lease.startFencing for
// its errors), emits Held, and starts the two supervisors: one waits for the
// lease to be lost, one rewrites our key as HELD if c.held says so, then
// watches it for DELETE (watchKey). Both stop in Release.
//
// The rewrite is not on the hand-off's path: a holder DELETE
// seen by the head already proves its promotion (D1), so the Holder is
// returned at once and its caller starts its work while the rewrite, which
// wakes the next waiter, is in flight. The rewrite is conditional on our
// key's create revision: if it finds the key gone, the Holder's context
// ends with ErrKeyDeleted, as for any deletion of a holder's key (D7).
func (s *Semaphore) newHolder(ctx context.Context, l *lease, c heldKey) (*Holder, error) {
	if err := l.startFencing(ctx, s.opts.FenceMargin, s.opts.OnRenew); err != nil {
		return nil, err
	}
	s.emit(Event{Kind: Held, Rev: c.rev, Lease: l.id, TTL: l.ttl, Cluster: l.clusterID()})
	hctx, cancel := context.WithCancelCause(context.Background())
	wctx, stop := context.WithCancel(context.Background())
	h := &Holder{s: s, l: l, key: c.key, rev: c.rev, ctx: hctx, cancel: cancel, stop: stop}
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		select {
		case <-l.Done():
			cancel(fmt.Errorf("%w: %s", l.Err(), c.key))
		case <-wctx.Done():
		}
	}()
	go func() {
		defer h.wg.Done()
		seen := c.seen
		if c.held != "" {
			var err error
			if seen, err = h.markHeld(wctx, c.held); err != nil {
				return
			}
		}
		h.watchKey(wctx, seen)
	}()
	return h, nil
}

// markHeld rewrites our key with the HELD record value (s.promote, retried
// while the lease lives and ctx, the holder's supervision, runs) and
// returns the write's revision. If the key is gone, or the lease lost, it
// ends the holder's context with that cause and returns the error.
func (h *Holder) markHeld(ctx context.Context, value string) (int64, error) {
	var rev int64
	err := retryEtcd(ctx, h.l, func() (err error) {
		rev, err = h.s.promote(ctx, h.key, h.rev, h.l, value)
		return err
	})
	if err != nil && ctx.Err() == nil {
		h.lose(err)
	}
	return rev, err
}

// watchKey cancels the holder when our key is deleted, or put without our
// lease (D7). rev is a revision at which the key is known to be ours. The
// watch is created with no start revision, so etcd serves it at once
// (D1a); when its created response shows the store passed rev, the key is
// re-read (verify) to cover the gap. A failed watch (leader lost) re-reads
// and watches again; one whose stream went silent (D7b (3)) watches again on a new
// stream from rev, with no read.
func (h *Holder) watchKey(ctx context.Context, rev int64) {
	again := 0 // watches made again in a row after a silence
	for ctx.Err() == nil {
		gen := streamGen.Load()
		wctx, cancel := context.WithCancel(onStream(ctx))
		opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
		if again > 0 { // every event since rev comes on the new stream, nothing to read
			opts = append(opts, resumeFrom(rev))
		}
		h.s.seams.watchedKey()
		wch, done := watchAsync(wctx, h.s.c, h.key, opts...)
		var lost, silent, ok bool
		rev, lost, silent = h.follow(wctx, wch, rev, again)
		cancel()
		<-done
		if silent {
			leaveStream(gen)
			again++
			continue
		}
		again = 0
		if lost || ctx.Err() != nil {
			return
		}
		if rev, ok = h.verify(ctx, rev); !ok {
			return
		}
	}
}

// follow reads one watch of our key until it ends or fails (lost false,
// watch again) or the holder is cancelled (lost true). Its stream is checked as the
// head's is (liveness.go, D7b (3)): silent true when it said nothing for silentAfter,
// to watch again on another. It returns the last revision at which the key was
// verified ours. A watch made again (again > 0 times after a silence) starts at
// resumeFrom(rev): its created response, due within createdWithin(again), needs no read.
func (h *Holder) follow(ctx context.Context, wch <-chan clientv3.WatchResponse, rev int64, again int) (int64, bool, bool) {
	replay := again > 0
	var probe *prober
	if h.s.seams.probing() {
		probe = &prober{cl: h.s.c, ctx: ctx, heard: newHeard(), tick: time.NewTicker(probeEvery), first: createdWithin(again)}
		defer probe.tick.Stop()
	}
	for {
		var wr clientv3.WatchResponse
		var open bool
		select {
		case wr, open = <-wch:
		case <-probe.c():
			if probe.check() == turnSilent {
				return rev, false, true
			}
			continue
		}
		if !open || wr.Err() != nil {
			return rev, false, false
		}
		if probe != nil {
			probe.heard.now()
		}
		if wr.Created && wr.Header.Revision > rev && !replay {
			v, ok := h.verify(ctx, rev)
			if !ok || v == rev { // lost, or the read failed: watch again
				return rev, h.ctx.Err() != nil, false
			}
			rev = v
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Kv.ModRevision <= rev: // covered by a read (D1a)
			case ev.Type == mvccpb.DELETE:
				h.lose(h.goneErr())
				return rev, true, false
			case ev.Kv.Lease != int64(h.l.id): // an operator's put detached it from our lease
				h.overwritten.Store(true)
				h.lose(fmt.Errorf("%w: %s was overwritten without our lease", ErrKeyDeleted, h.key))
				return rev, true, false
			}
		}
	}
}

// verify reads our key: if it is gone, or no longer the key we created on
// our lease, it cancels the holder (ErrKeyDeleted) and returns false. It
// returns the read's revision, or rev unchanged after a failed read (having
// waited a second, false if ctx ended meanwhile).
func (h *Holder) verify(ctx context.Context, rev int64) (int64, bool) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout) // a silent member is not waited for (D7b (3))
	resp, err := h.s.c.Get(rctx, h.key)
	cancel()
	switch {
	case err != nil:
		return rev, sleepCtx(ctx, time.Second)
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev:
		h.lose(h.goneErr())
		return rev, false
	case resp.Kvs[0].Lease != int64(h.l.id):
		h.overwritten.Store(true)
		h.lose(fmt.Errorf("%w: %s was overwritten without our lease", ErrKeyDeleted, h.key))
		return rev, false
	}
	return resp.Header.Revision, true
}

// lose ends the holder's context with err, the slot's loss, marked ErrDeadlinePassed when
// the lease's deadline had passed already (D7b (1): the child must go at once).
func (h *Holder) lose(err error) { h.cancel(h.l.lateCause(err)) }

// Context ends when the slot is lost or released; context.Cause(ctx) says why.
func (h *Holder) Context() context.Context { return h.ctx }

// Rev is the create revision of our key: the fencing token (CONCH_REV).
func (h *Holder) Rev() int64 { return h.rev }

// Lease is the ID of the lease our key is bound to (CONCH_LEASE, D5).
func (h *Holder) Lease() clientv3.LeaseID { return h.l.id }

// TTL is the lease TTL the server granted (whole seconds, at least what
// Options.TTL asked for rounded up, D4).
func (h *Holder) TTL() time.Duration { return h.l.ttl }

// Key is our key under the semaphore's prefix.
func (h *Holder) Key() string { return h.key }

// Release gives the slot back: it stops the supervisors and revokes the
// lease, which deletes our key (D2: one request). It ignores ctx's cancellation (a fresh
// bounded context: the release must happen after the caller's context ended).
// Each try of the revoke is bounded by releaseTry, 1 s (D7b (3): a try that went to a member
// that stopped answering is given up and sent again, to the next connection of the round
// robin, rather than waited on). When a try fails, it tries again every releaseRetry until
// etcd answers or one TTL has passed since the call (D7b: after an outage shorter than the TTL the slot is free again as soon as
// etcd answers, instead of idle until the lease expires, which etcd's restart even postpones
// by a whole TTL); a healthy etcd answers the first try in milliseconds. It blocks twice as
// long at most when an operator's put detached our key from the lease (then it is deleted too).
// If etcd does not answer in time, the key goes at lease expiry and the error says so.
func (h *Holder) Release(ctx context.Context) error {
	h.stop()
	within := min(h.l.ttl, releaseTry)
	if !h.s.seams.probing() { // as before D7b (3): one long first try
		within = min(h.l.ttl, releaseTimeout)
	}
	if h.ctx.Err() != nil {
		within = min(within, giveUpTimeout)
	}
	err := h.l.revokeRetrying(ctx, within, h.l.ttl)
	if h.overwritten.Load() {
		// revoking no longer deletes a key detached from our lease; delete
		// it ourselves, if it is still the one we created, or the slot
		// would stay taken for good
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
		_, derr := h.s.c.Txn(dctx).If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
			Then(clientv3.OpDelete(h.key)).Commit()
		cancel()
		if derr != nil && err == nil {
			err = fmt.Errorf("cannot delete overwritten key %s: %w", h.key, derr)
		}
	}
	h.cancel(ErrReleased)
	h.wg.Wait()
	return err
}

// Bind returns a context derived from parent that also ends when the slot is lost, so that
// one context carries every reason to stop the work done under the slot: context.Cause is
// then the holder's own error (ErrLeaseLost, ErrFenced or ErrKeyDeleted, wrapped with the
// key; ErrReleased once Release ran), or parent's cause when parent ended first. Whichever
// ends it first is its cause for good. The CancelFunc releases the binding and must be
// called once the work is done (after that, Cause is context.Canceled if nothing else
// ended it).
func (h *Holder) Bind(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
