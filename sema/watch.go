package sema

import (
	"context"
	"errors"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// turn is what ended a wait for our turn.
type turn int

const (
	turnNone       turn = iota // nothing changed (the D1a re-read only)
	turnRerank                 // something ahead changed, or a watch failed: read again
	turnReranked               // the D1a re-read found a change: act on its ranking
	turnPromoted               // a holder left while we are the head (D1: no re-read)
	turnKeyDeleted             // our own key was deleted
	turnLeaseLost
	turnCtx
)

// watchTurn blocks until something can change our position (key, created
// at myRev, ranked by r). The head of the queue (rank == max) watches the
// max holder keys for DELETE: any one proves its promotion. Every other
// waiter watches only its predecessor, for DELETE or PUT (the PUT of a
// promoted head). So one release wakes at most two waiters whatever max and
// the queue length (D1). Our own key is watched for DELETE only (PUTs
// filtered server-side).
//
// The watches are created with no start revision, so etcd serves them from
// its synced group at once rather than from the unsynced one, which catches
// up every 100 ms (D1a). If a watch's created response shows the store
// passed r.rev, the gap is covered by re-reading our position once all are
// created (recheck); events at or before r.rev (a lagging member's watch)
// are ignored. A failed watch (leader lost, ErrCompacted in the D1 mode)
// means re-rank. It returns the turn, and with turnReranked or a re-read
// promotion the fresh ranking. The watch goroutines are cancelled and
// joined before it returns.
func (s *Semaphore) watchTurn(ctx context.Context, l *lease, key string, myRev int64, r ranking) (turn, ranking) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	out := make(chan turn, 1)
	created := make(chan int64, len(r.holders)+2)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	watch := func(k string, onEvent turn, opts ...clientv3.OpOption) {
		if s.legacyWatch { // D1 as first written: from the ranking read
			opts = append(opts, clientv3.WithRev(r.rev+1))
		} else {
			opts = append(opts, clientv3.WithCreatedNotify())
		}
		wch := s.c.Watch(wctx, k, opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case out <- watchEvents(wch, r.rev, onEvent, created):
			default:
			}
		}()
	}
	n := 1
	if r.holders != nil {
		for _, h := range r.holders {
			watch(h, turnPromoted, clientv3.WithFilterPut())
		}
		n += len(r.holders)
	} else if r.paused { // D16: it would hold but for the pause: wait for its DELETE
		watch(PauseKey(s.name, s.max), turnRerank, clientv3.WithFilterPut())
		n++
	} else {
		watch(r.pred, turnRerank)
		n++
	}
	watch(key, turnKeyDeleted, clientv3.WithFilterPut())
	if !s.legacyWatch {
		t, r2 := s.awaitCreated(ctx, l, position{key, myRev, r}, watchSet{out, created, n})
		if t != turnNone {
			return t, r2
		}
	}
	var t turn
	select {
	case t = <-out:
	case <-l.Done():
		t = turnLeaseLost
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return turnCtx, r
	}
	return t, r
}

// watchEvents reads one watch until an event after rev (onEvent), or its
// failure or end (turnRerank). Each created response's header revision goes
// to created, which must have room for it.
func watchEvents(wch clientv3.WatchChan, rev int64, onEvent turn, created chan<- int64) turn {
	for wr := range wch {
		if wr.Err() != nil {
			return turnRerank
		}
		if wr.Created {
			created <- wr.Header.Revision
			continue
		}
		for _, ev := range wr.Events { // PUTs are filtered where they do not count
			if ev.Kv.ModRevision > rev { // earlier ones are in the ranking read (D1a)
				return onEvent
			}
		}
	}
	return turnRerank
}

// position is a waiter's place as watchTurn ranked it: our key, its create revision, and the
// ranking read.
type position struct {
	key   string
	myRev int64
	r     ranking
}

// watchSet is where one watchTurn's watches report: the turn that ends the wait, each
// watch's created revision, and how many watches there are.
type watchSet struct {
	out     <-chan turn
	created <-chan int64
	n       int
}

// awaitCreated waits until the w.n watches of watchTurn are created and, if
// the newest created revision is past p.r.rev, re-reads our position (D1a).
// It returns turnNone when the wait is to go on from the watches: nothing
// they watch changed up to the re-read; else the turn that ended it (a
// watch's event or failure, the lease, ctx, or recheck's verdict).
func (s *Semaphore) awaitCreated(ctx context.Context, l *lease, p position, w watchSet) (turn, ranking) {
	var rw int64
	for range w.n {
		select {
		case v := <-w.created:
			rw = max(rw, v)
		case t := <-w.out:
			return t, p.r
		case <-l.Done():
			return turnLeaseLost, p.r
		case <-ctx.Done():
			return turnCtx, p.r
		}
	}
	if rw <= p.r.rev {
		return turnNone, p.r
	}
	return s.recheck(ctx, p.key, p.myRev, p.r)
}

// recheck re-reads our position (D1a: one Txn, O(max) keys) and compares it
// with r: turnNone if nothing we watch changed, turnPromoted or
// turnReranked with the fresh ranking if it did, turnKeyDeleted if our key
// is gone, turnRerank if the read failed.
//
// A waiter behind the head watches only its predecessor, so it first reads
// that one key (predUnchanged): still there and not rewritten since r.rev
// means that every event of it is after the read, so after the watch's
// creation, and the watch will deliver it; nothing else can wake this
// waiter (D1). Only a changed predecessor costs the whole re-read, whose
// sorted reads make etcd read the whole queue.
func (s *Semaphore) recheck(ctx context.Context, key string, myRev int64, r ranking) (turn, ranking) {
	if r.holders == nil && r.pred != "" {
		same, err := s.predUnchanged(ctx, key, myRev, r)
		switch {
		case errors.Is(err, ErrKeyDeleted):
			return turnKeyDeleted, r
		case err != nil:
			return turnRerank, r
		case same:
			return turnNone, r
		}
	}
	r2, err := s.rerank(ctx, key, myRev)
	switch {
	case errors.Is(err, ErrKeyDeleted):
		return turnKeyDeleted, r
	case err != nil:
		return turnRerank, r
	case r2.held:
		return turnPromoted, r2
	case moved(r, r2):
		return turnReranked, r2
	}
	return turnNone, r
}

// waitGone blocks until key, present at rev, is deleted (PUTs filtered
// server-side), the watch fails (after a pause of retryMin, so a failing
// watch does not spin), lease l is lost or ctx ends: turnRerank (look
// again), turnLeaseLost or turnCtx. As in watchTurn the watch is served at
// once (D1a): if it was created past rev, one read of key covers the gap.
// The watch ends before it returns.
func (s *Semaphore) waitGone(ctx context.Context, l *lease, key string, rev int64) turn {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	if s.legacyWatch {
		opts = []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithRev(rev + 1)}
	}
	wch := s.c.Watch(wctx, key, opts...)
	for {
		select {
		case wr, ok := <-wch:
			switch {
			case !ok || wr.Err() != nil:
				sleepCtx(ctx, retryMin)
				return turnRerank
			case wr.Created && wr.Header.Revision > rev:
				resp, err := s.c.Get(wctx, key, clientv3.WithKeysOnly())
				if err != nil {
					sleepCtx(ctx, retryMin)
					return turnRerank
				}
				if len(resp.Kvs) == 0 {
					return turnRerank // gone meanwhile
				}
			case len(wr.Events) > 0:
				return turnRerank
			}
		case <-l.Done():
			return turnLeaseLost
		case <-ctx.Done():
			return turnCtx
		}
	}
}
