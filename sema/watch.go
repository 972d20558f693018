package sema

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/watchstream"
	"github.com/conch-project/conch/sema/schema"
)

// turn is what ended a wait for our turn.
type turn int

const (
	turnNone       turn = iota // nothing changed (the D1a re-read only)
	turnRerank                 // something ahead changed, or a watch failed: read again
	turnReranked               // the D1a re-read found a change: act on its ranking
	turnPromoted               // a holder left while we are the head (D1: no re-read)
	turnClear                  // turnPromoted, and the pause watch says no pause then (D16b)
	turnKeyDeleted             // our own key was deleted
	turnLeaseLost
	turnCtx
	turnSilent // the head's watch stream stopped answering (D7b (3)): watch again elsewhere
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
// means re-rank. The head's stream is checked (liveness.go, D7b (3)): a
// stream that goes silent is left, and the watches are made again on a new
// one from r.rev (resumeFrom), so that every event since the ranking read
// comes on it and nothing is read again (ErrCompacted there means re-rank). It returns
// the turn, and with turnReranked or a re-read promotion the fresh ranking.
// The watch goroutines are cancelled and joined before it returns.
func (s *Semaphore) watchTurn(ctx context.Context, l *lease, key string, myRev int64, r ranking) (turn, ranking) {
	p := position{key, myRev, r}
	for again := 0; ; again++ {
		gen := streamGen.Load()
		t, r2 := s.watchOnce(ctx, l, p, again)
		if t != turnSilent {
			return t, r2
		}
		leaveStream(gen)
	}
}

// createdWithin bounds the wait for the created responses of the head's watches made again
// times after a silence (again > 0): a live member answers in milliseconds, a new stream
// can land on the silent member again, and a loaded machine must not make every try fail.
func createdWithin(again int) time.Duration {
	if again == 0 {
		return silentAfter
	}
	return min(silentAfter, time.Duration(again)*probeQuiet)
}

// watchOnce is one set of watchTurn's watches: served at once (D1a) the first time
// (again 0), from p.r.rev when made again after a silence. It returns turnSilent when
// the head's stream said nothing for silentAfter (createdWithin until the watches exist).
// A head whose ranking saw no pause follows the pause key too (D16b): a promotion by a
// holder's DELETE is then confirmed on the stream (turnClear), not by a read.
func (s *Semaphore) watchOnce(ctx context.Context, l *lease, p position, again int) (turn, ranking) {
	r := p.r
	wctx, cancel := context.WithCancel(onStream(clientv3.WithRequireLeader(ctx)))
	k := &watchKit{s: s, wctx: wctx, rev: r.rev, out: make(chan turn, 1),
		created: make(chan int64, len(r.holders)+2), hd: newHeard()}
	defer func() { cancel(); k.wg.Wait() }()
	if again > 0 {
		k.from = r.rev
	}
	if r.holders != nil && r.pause == nil {
		k.follow = newPauseFollow(s.c, wctx)
	}
	n := k.startAll(p)
	var probe *prober
	if r.holders != nil && s.seams.probing() {
		probe = &prober{cl: s.c, ctx: wctx, heard: k.hd, tick: time.NewTicker(probeEvery)}
		defer probe.tick.Stop()
	}
	t, r2 := s.awaitCreated(ctx, l, p, watchSet{k.out, k.created, n, k.from != 0, probe, createdWithin(again)})
	if t != turnNone { // a promotion here is not confirmed: the caller reads the pause
		return t, r2
	}
	if k.follow != nil { // from the ranking read (or the re-read) on, every pause event comes
		k.follow.armed.Store(true)
		s.seams.armed()
	}
	t = awaitTurn(ctx, l, k.out, probe)
	if t == turnPromoted && k.follow != nil {
		t = k.follow.clear(ctx, l, k.out) // D16b: not while paused, and no read
	}
	return t, r
}

// watchKit starts the watches of one watchOnce: each reports the turn that ends the wait on
// out (the first one wins) and its created revision on created.
type watchKit struct {
	s       *Semaphore
	wctx    context.Context
	rev     int64 // the ranking read's revision: events up to it are in the read
	from    int64 // 0: served at once (D1a); else the revision the watch resumes from (resumeFrom)
	out     chan turn
	created chan int64
	hd      *heard
	follow  *pauseFollow // the head's watch of the pause (D16b); nil: none
	wg      sync.WaitGroup
}

// startAll starts the watches of position p (D1): the head's holders (and the pause, when
// followed), the pause alone for a key held back by it, else the predecessor; our own key
// always. It returns how many it started.
func (k *watchKit) startAll(p position) int {
	r := p.r
	n := 1
	switch {
	case r.holders != nil:
		for _, h := range r.holders {
			k.watch(h, turnPromoted, nil, clientv3.WithFilterPut())
		}
		n += len(r.holders)
		if k.follow != nil {
			k.watch(schema.PauseKey(k.s.name, k.s.max), turnRerank, k.follow.progressed)
			n++
		}
	case r.paused: // D16: it would hold but for the pause: wait for its DELETE
		k.watch(schema.PauseKey(k.s.name, k.s.max), turnRerank, nil, clientv3.WithFilterPut())
		n++
	default:
		k.watch(r.pred, turnRerank, nil)
		n++
	}
	k.watch(p.key, turnKeyDeleted, nil, clientv3.WithFilterPut())
	return n
}

// watch starts the watch of key in a goroutine (clientv3's Watch waits for the watch's
// creation: on a silent stream, forever). onEvent is the turn an event after k.rev means;
// progress, if not nil, is the followed pause key's hook (pauseFollow.progressed), and the
// follow is marked changed when that watch returns.
func (k *watchKit) watch(key string, onEvent turn, progress func(int64), opts ...clientv3.OpOption) {
	if k.from != 0 {
		opts = append(opts, resumeFrom(k.from))
	}
	opts = append(opts, clientv3.WithCreatedNotify())
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		wch := k.s.c.Watch(k.wctx, key, opts...)
		t, at := k.watchEvents(wch, onEvent, progress)
		switch {
		case progress != nil:
			k.follow.ended()
		case t == turnPromoted:
			k.follow.promotedAt(at)
		}
		select {
		case k.out <- t:
		default:
		}
	}()
}

// awaitTurn waits for the turn that one of the watches reports, the lease's loss or ctx's
// end (turnCtx whatever else came), checking the stream with probe if not nil.
func awaitTurn(ctx context.Context, l *lease, out <-chan turn, probe *prober) turn {
	var t turn
	for t == turnNone {
		select {
		case t = <-out:
		case <-l.Done():
			t = turnLeaseLost
		case <-ctx.Done():
			t = turnCtx
		case <-probe.c():
			t = probe.check()
		}
	}
	if ctx.Err() != nil {
		return turnCtx
	}
	return t
}

// prober checks that a watch stream still answers (liveness.go, D7b (3)).
type prober struct {
	cl    *clientv3.Client
	ctx   context.Context // the watches' context: it names their stream
	heard *heard
	tick  *time.Ticker
	asked time.Time     // the last progress request
	first time.Duration // if not 0: the bound on the first response, silentAfter's after
}

// c is the channel of the next look at the stream; nil (never) without a prober.
func (p *prober) c() <-chan time.Time {
	if p == nil {
		return nil
	}
	return p.tick.C
}

// check returns turnSilent if the stream said nothing for silentAfter (or p.first before
// its first response); else it asks for a progress notification if it said nothing for
// probeQuiet (at most once per probeQuiet), and returns turnNone (watchstream.Look).
func (p *prober) check() turn {
	if watchstream.Look(p.ctx, p.cl, p.heard.Heard, p.first, &p.asked) {
		return turnSilent
	}
	return turnNone
}

// askProgress requests a progress notification on the watch stream that ctx names (its
// metadata, onStream), giving up after within; whether it was sent is not reported.
func askProgress(ctx context.Context, cl *clientv3.Client, within time.Duration) {
	watchstream.AskProgress(ctx, cl, within)
}

// watchEvents reads one watch until an event after k.rev (onEvent, and the event's
// revision), or its failure or end (turnRerank, 0). Each created response's header revision goes
// to k.created, which must have room for it. Every response is noted in k.hd. progress, if not
// nil, is called with the revision of each progress notification (the pause follow, D16b).
func (k *watchKit) watchEvents(wch clientv3.WatchChan, onEvent turn, progress func(int64)) (turn, int64) {
	for wr := range wch {
		k.hd.now()
		if wr.Err() != nil {
			return turnRerank, 0
		}
		if wr.Created {
			k.created <- wr.Header.Revision
			continue
		}
		if progress != nil && wr.IsProgressNotify() {
			progress(wr.Header.Revision)
			continue
		}
		for _, ev := range wr.Events { // PUTs are filtered where they do not count
			if ev.Kv.ModRevision > k.rev { // earlier ones are in the ranking read (D1a)
				return onEvent, ev.Kv.ModRevision
			}
		}
	}
	return turnRerank, 0
}

// position is a waiter's place as watchTurn ranked it: our key, its create revision, and the
// ranking read.
type position struct {
	key   string
	myRev int64
	r     ranking
}

// watchSet is where one watchTurn's watches report: the turn that ends the wait, each
// watch's created revision, and how many watches there are; whether they start at the
// ranking read + 1 (replay: no gap to cover), and the stream's prober (nil: none).
type watchSet struct {
	out     <-chan turn
	created <-chan int64
	n       int
	replay  bool
	probe   *prober
	within  time.Duration // with probe: the created responses' bound
}

// awaitCreated waits until the w.n watches of watchTurn are created and, if
// the newest created revision is past p.r.rev, re-reads our position (D1a).
// It returns turnNone when the wait is to go on from the watches: nothing
// they watch changed up to the re-read; else the turn that ended it (a
// watch's event or failure, the lease, ctx, or recheck's verdict).
func (s *Semaphore) awaitCreated(ctx context.Context, l *lease, p position, w watchSet) (turn, ranking) {
	var rw int64
	for got := 0; got < w.n; {
		select {
		case v := <-w.created:
			rw = max(rw, v)
			got++
		case t := <-w.out:
			return t, p.r
		case <-l.Done():
			return turnLeaseLost, p.r
		case <-ctx.Done():
			return turnCtx, p.r
		case <-w.probe.c():
			if w.probe.heard.quiet() >= w.within {
				return turnSilent, p.r
			}
		}
	}
	if rw <= p.r.rev || w.replay {
		return turnNone, p.r
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout) // a silent member is not waited for (D7b (3))
	defer cancel()
	return s.recheck(rctx, p.key, p.myRev, p.r)
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
	wch := s.c.Watch(wctx, key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
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
