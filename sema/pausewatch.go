// The head of the queue follows the pause key on its watch stream (D16b): a promotion
// proved by a holder's DELETE needs no read of the pause.

package sema

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// pauseAsk is how often the head asks its stream again for a progress notification while
// it confirms a promotion (pauseFollow.clear): the member sends none while a watch of the
// stream is still catching up, and a request may be lost with a stream that broke.
const pauseAsk = 20 * time.Millisecond

// pauseFollow is the head's watch of the pause key, on the stream of its holder watches
// (D16b). A holder's DELETE at revision X promotes the head (D1) only if the semaphore was
// not paused at X. The ranking read saw no pause; every pause event after it ends the wait
// (the re-read reads the pause). What a watch event alone cannot say is that no pause event
// at or before X is still on its way: events of different watches are not ordered with one
// another (clientv3 hands each watch its own channel; etcd resends a slow watch's events
// later). A progress notification can: etcd sends one only when every watch of the stream
// has been sent every event up to its revision, and each watch's channel delivers it after
// those events. So the head asks the stream for one and waits until the pause watch has
// passed X (clear).
type pauseFollow struct {
	cl      *clientv3.Client
	wctx    context.Context // the watches' context: it names their stream
	armed   atomic.Bool     // the pause watch covers every revision after the ranking read
	seen    atomic.Int64    // the pause watch has delivered every event up to this revision
	changed atomic.Bool     // a pause event after the ranking read, or the watch ended
	wake    chan struct{}   // capacity 1: seen or changed moved
	at      atomic.Int64    // the revision of the holder's DELETE that promoted us
}

func newPauseFollow(cl *clientv3.Client, wctx context.Context) *pauseFollow {
	return &pauseFollow{cl: cl, wctx: wctx, wake: make(chan struct{}, 1)}
}

func (f *pauseFollow) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// promotedAt notes rev, the revision of a holder's DELETE that promoted us (the first wins).
func (f *pauseFollow) promotedAt(rev int64) {
	if f != nil {
		f.at.CompareAndSwap(0, rev)
	}
}

// progressed is the pause watch's progress hook (watchEvents): the watch has delivered every
// event up to rev.
func (f *pauseFollow) progressed(rev int64) {
	if rev > f.seen.Load() {
		f.seen.Store(rev)
		f.poke()
	}
}

// ended marks f changed when the pause watch returned (an event after the ranking read, its
// failure or its end): clear leaves the decision to the re-read.
func (f *pauseFollow) ended() {
	f.changed.Store(true)
	f.poke()
}

// clear confirms a promotion by a holder's DELETE (f.at) against the pause (D16b): it asks
// the stream for a progress notification until the pause watch has passed that revision
// (turnClear), a pause event came or the watch ended (turnRerank: the re-read decides), or
// pauseTry passed (turnRerank, as a failed pause read: a silent member must not hold the
// hand-off, D7b (3)). out is the other watches' channel: our key's deletion ends it
// (turnKeyDeleted); the lease's loss and ctx's end too.
func (f *pauseFollow) clear(ctx context.Context, l *lease, out <-chan turn) turn {
	if !f.armed.Load() || f.at.Load() == 0 {
		return turnPromoted // not confirmed: the caller reads the pause (pauseCheck)
	}
	give := time.NewTimer(pauseTry)
	defer give.Stop()
	ask := time.NewTicker(pauseAsk)
	defer ask.Stop()
	for asked := false; ; {
		switch {
		case f.changed.Load():
			return turnRerank
		case f.seen.Load() >= f.at.Load():
			return turnClear
		case !asked:
			f.ask()
			asked = true
		}
		select {
		case <-f.wake:
		case <-ask.C:
			f.ask()
		case t := <-out:
			if t != turnPromoted { // another holder's DELETE changes nothing
				return t
			}
		case <-give.C:
			return turnRerank
		case <-l.Done():
			return turnLeaseLost
		case <-ctx.Done():
			return turnCtx
		}
	}
}

// ask requests a progress notification on the watches' stream, bounded by pauseAsk (not
// sent: the next tick asks again).
func (f *pauseFollow) ask() { askProgress(f.wctx, f.cl, pauseAsk) }
