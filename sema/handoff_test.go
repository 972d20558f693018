package sema

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The HELD rewrite of a promoted waiter runs beside the holder's work;
// if it finds our key gone (an operator deleted it between the
// promotion and the rewrite), the Holder's context must still end, with
// ErrKeyDeleted (D7). The race is set up directly: the key is deleted before
// newHolder is asked to rewrite it.
func TestHeldRewriteFindsKeyGone(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "rw", 1, Options{})
	l, err := grantLease(t.Context(), c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := schema.LeaseKey(s.prefix, l.id)
	put, err := c.Put(t.Context(), key, `{"v":1}`, clientv3.WithLease(l.id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	h, err := s.newHolder(t.Context(), l, heldKey{key: key, rev: put.Header.Revision, seen: put.Header.Revision, held: `{"v":1}`})
	if err != nil {
		t.Fatalf("newHolder: %v", err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(testTimeout):
		t.Fatal("holder's context did not end although its rewrite found the key gone")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, ErrKeyDeleted) {
		t.Fatalf("cause = %v, want ErrKeyDeleted", cause)
	}
	if n := keyCount(t, c, s); n != 0 {
		t.Fatalf("%d keys: the conditional rewrite must not bring the key back", n)
	}
	h.Release(t.Context())
}

// A promoted waiter's Acquire returns before its key is rewritten as HELD
// (the rewrite is off the hand-off path), and the rewrite still happens and
// wakes the next waiter.
func TestPromotedRewritesAndWakesNext(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	newS := func() *Semaphore { return newSem(t, c, "pw", 1, Options{}) }
	a := mustAcquire(t, newS())
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	bch := acquireAsync(ctx, newS())
	waitQueued(t, c, a.s, 2)
	var cLog eventLog
	cs := newS()
	cs.opts.OnEvent = cLog.add
	cch := acquireAsync(ctx, cs)
	waitQueued(t, c, a.s, 3)
	release(t, a)
	b := <-bch
	if b.err != nil {
		t.Fatalf("b: %v", b.err)
	}
	waitHeldSince(t, c, "pw", 1, b.h.Key())
	// b's rewrite (a PUT) wakes c, its successor, which is now next in line
	cLog.waitFor(t, "c next in line", func(e Event) bool { return e.Kind == Waiting && e.Ahead == 0 })
	release(t, b.h)
	if r := <-cch; r.err != nil {
		t.Fatalf("c: %v", r.err)
	} else {
		release(t, r.h)
	}
}
