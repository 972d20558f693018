package sema

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/sema/schema"
)

// pausedWaiting reports whether the log has a Waiting event of a paused
// semaphore.
func pausedWaiting(e Event) bool { return e.Kind == Waiting && e.Paused != nil }

// D16: a pause keeps every waiter in its place, those of rank < max
// included, while running holders go on; --nonblock finds no slot and gets
// the pause; on resume the max waiters of rank < max wake, and the first
// one behind them, which learns from the last one's HELD rewrite that it is
// next in line (D1's chain): at most max+1 watch events whatever the queue's
// length, never a herd; and the queue's order is kept after it.
func TestPauseHoldsQueueThenResumes(t *testing.T) {
	srv, c := startEtcd(t)
	const n = 2
	h1 := mustAcquire(t, newSem(t, c, "pz", n, Options{}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	p, wrote, err := setPause(ctx, c, "pz", n, "root@node-a", "freeze")
	if err != nil || !wrote || p.Who != "root@node-a" {
		t.Fatalf("SetPause: %+v %v %v", p, wrote, err)
	}
	_, err = newSem(t, c, "pz", n, Options{Nonblock: true}).Acquire(ctx)
	var we *WaitError
	if !errors.Is(err, ErrNoSlot) || !errors.As(err, &we) || we.Paused == nil || we.Paused.Reason != "freeze" {
		t.Fatalf("nonblock while paused with a slot free: %v, want ErrNoSlot with the pause", err)
	}
	const w = 10
	logs := make([]*eventLog, w)
	var waiters []<-chan acquired
	base := newSem(t, c, "pz", n, Options{})
	for i := range w {
		logs[i] = &eventLog{}
		waiters = append(waiters, acquireAsync(ctx, newSem(t, c, "pz", n, Options{OnEvent: logs[i].add})))
		waitQueued(t, c, base, i+2)
	}
	logs[0].waitFor(t, "first waiter waits on the pause", pausedWaiting)
	release(t, h1) // a holder leaving while paused starts nobody
	waitQueued(t, c, base, w)
	logs[1].waitFor(t, "second waiter, now rank < max, waits on the pause", pausedWaiting)
	before := serverEvents(t, srv)
	if _, had, err := resume(ctx, c, "pz", n); err != nil || !had {
		t.Fatalf("Resume: %v %v", had, err)
	}
	resumed := time.Now()
	var holders []*Holder
	for i := range n {
		r := <-waiters[i]
		if r.err != nil {
			t.Fatalf("waiter %d after resume: %v", i, r.err)
		}
		holders = append(holders, r.h)
	}
	t.Logf("%d waiters hold %v after the resume", n, time.Since(resumed).Round(time.Microsecond))
	waitRewritten(t, c, holders)
	woke := serverEvents(t, srv) - before
	t.Logf("watch events sent for the resume and its %d promotions: %d", n, woke)
	if woke > n+1 {
		t.Fatalf("%d watch events for a resume with %d slots and %d waiters: more than max+1 (D1's bound)", woke, n, w)
	}
	for i := n; i < w; i++ { // FIFO after the resume
		release(t, holders[0])
		r := <-waiters[i]
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		holders = append(holders[1:], r.h)
	}
	for _, h := range holders {
		release(t, h)
	}
}

// waitRewritten polls until each promoted holder's HELD rewrite is done (its
// key's mod revision passed its create revision), so the events it causes
// are counted.
func waitRewritten(t *testing.T, c *clientv3.Client, hs []*Holder) {
	t.Helper()
	for _, h := range hs {
		polltest.Until(t, testTimeout, h.Key()+" rewritten as held", func() bool {
			resp, err := c.Get(t.Context(), h.Key())
			return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision > resp.Kvs[0].CreateRevision
		})
	}
}

// D16 against a hand-written pause: a value that is not a pause record still
// pauses (never a silent start), and Nonblock's error says what was found.
func TestPauseGarbage(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	if _, err := c.Put(t.Context(), schema.PauseKey("pg", 1), "\x00garbage{"); err != nil {
		t.Fatal(err)
	}
	_, err := newSem(t, c, "pg", 1, Options{Nonblock: true}).Acquire(t.Context())
	var we *WaitError
	if !errors.As(err, &we) || we.Paused == nil || we.Paused.Err == nil || we.Paused.Raw != "\x00garbage{" {
		t.Fatalf("nonblock with a garbage pause: %v, want ErrNoSlot naming the unreadable record", err)
	}
	if _, err := c.Put(t.Context(), schema.PauseRoot+"p\"g/01", `{"who":"x@y"}`); err != nil { // names no semaphore
		t.Fatal(err)
	}
	resp, err := c.Get(t.Context(), schema.PauseRoot, clientv3.WithPrefix(), byCreateAsc)
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("pause keys: %v %v", resp, err)
	}
	if p0, p1 := schema.DecodePause(resp.Kvs[0]), schema.DecodePause(resp.Kvs[1]); p0.Max != 1 || p0.Err == nil || p1.Max != 0 || p1.Who != "x@y" {
		t.Fatalf("DecodePause: %+v %+v", p0, p1)
	}
}

// D16 with --spread (D11): the pause read rides in the enqueue Txn after
// the ranking reads and before the node-wait marker's ops, so a --spread key
// of rank < max stays queued while paused, --nonblock gets the pause, and a
// second process of the same node waits as a node waiter, its marker beside
// the pause key; after Resume the first holds, and the node
// waiter once it releases.
func TestPauseSpreadNodeWaiters(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	if _, _, err := setPause(ctx, c, "psn", 2, "root@n0", "freeze"); err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	first := acquireAsync(ctx, newSem(t, c, "psn", 2, Options{Spread: true, Node: "n1", OnEvent: log.add}))
	log.waitFor(t, "n1's key waits on the pause", pausedWaiting)
	_, err := newSem(t, c, "psn", 2, Options{Spread: true, Node: "n2", Nonblock: true}).Acquire(ctx)
	var we *WaitError
	if !errors.As(err, &we) || we.Paused == nil || we.Paused.Reason != "freeze" {
		t.Fatalf("--spread --nonblock while paused with a slot free: %v, want ErrNoSlot with the pause", err)
	}
	second := acquireAsync(ctx, newSem(t, c, "psn", 2, Options{Spread: true, Node: "n1"}))
	polltest.Until(t, testTimeout, "n1's second process waiting for its node's key", func() bool { return etcdtest.KeysUnder(t, c, schema.NodeWaitRoot) == 1 })
	if n := etcdtest.KeysUnder(t, c, schema.PauseRoot); n != 1 {
		t.Fatalf("%d pause keys while paused, want 1", n)
	}
	select {
	case a := <-first:
		t.Fatalf("n1 acquired while paused: %+v", a)
	default:
	}
	if _, had, err := resume(ctx, c, "psn", 2); err != nil || !had {
		t.Fatalf("Resume: %v %v", had, err)
	}
	a := <-first
	if a.err != nil {
		t.Fatalf("n1 after the resume: %v", a.err)
	}
	release(t, a.h)
	b := <-second
	if b.err != nil {
		t.Fatalf("n1's node waiter after the release: %v", b.err)
	}
	release(t, b.h)
}
