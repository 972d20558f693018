package sema

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/sema/schema"
)

func TestAcquireReleaseCapacity(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "cap", 2, Options{})
	h1, h2 := mustAcquire(t, s), mustAcquire(t, s)
	if h1.Rev() >= h2.Rev() {
		t.Fatalf("fencing tokens not increasing: %d, %d", h1.Rev(), h2.Rev())
	}
	s3 := newSem(t, c, "cap", 2, Options{Nonblock: true})
	if _, err := s3.Acquire(t.Context()); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("third acquire with 2 held: %v, want ErrNoSlot", err)
	}
	if n := keyCount(t, c, s); n != 2 { // the nonblock key is gone at once (D3)
		t.Fatalf("%d keys after a --nonblock refusal, want 2", n)
	}
	release(t, h1)
	h3, err := s3.Acquire(t.Context())
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	release(t, h2)
	release(t, h3)
	if n := keyCount(t, c, s); n != 0 { // Release revokes at once, not at expiry
		t.Fatalf("%d keys after all released, want 0", n)
	}
	if cause := context.Cause(h3.Context()); !errors.Is(cause, ErrReleased) {
		t.Fatalf("cause after release = %v", cause)
	}
}

// D1's counter-example: N=2, A and B hold, C and D wait; the YOUNGER holder
// B releases. C must start while A still holds.
func TestD1YoungerHolderReleasesFirst(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "d1", 2, Options{})
	a, b := mustAcquire(t, s), mustAcquire(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	cch := acquireAsync(ctx, newSem(t, c, "d1", 2, Options{}))
	waitQueued(t, c, s, 3)
	dch := acquireAsync(ctx, newSem(t, c, "d1", 2, Options{}))
	waitQueued(t, c, s, 4)
	release(t, b)
	r := <-cch
	if r.err != nil {
		t.Fatalf("C did not acquire while A holds: %v", r.err)
	}
	select {
	case d := <-dch:
		t.Fatalf("D acquired with A and C holding: %v", d.err)
	case <-time.After(300 * time.Millisecond): // negative check: D must keep waiting
	}
	if a.Context().Err() != nil {
		t.Fatal("A lost its slot")
	}
	release(t, a)
	if d := <-dch; d.err != nil {
		t.Fatalf("D after A released: %v", d.err)
	} else {
		release(t, d.h)
	}
	release(t, r.h)
}

// Every release order must promote the right waiters: release holders and
// waiters in all orders for N=3 and check that each waiter holds as soon as
// fewer than N keys are ahead of it (D1).
func TestD1AnyReleaseOrder(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	const n = 3
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
		s := newSem(t, c, "order", n, Options{})
		var holders []*Holder
		for range n {
			holders = append(holders, mustAcquire(t, s))
		}
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		var waiters []<-chan acquired
		for i := range n {
			waiters = append(waiters, acquireAsync(ctx, newSem(t, c, "order", n, Options{})))
			waitQueued(t, c, s, n+i+1)
		}
		for i, idx := range order {
			release(t, holders[idx])
			r := <-waiters[i] // the i-th oldest waiter must get the freed slot
			if r.err != nil {
				t.Fatalf("order %v: waiter %d: %v", order, i, r.err)
			}
			holders[idx] = r.h
		}
		for _, h := range holders {
			release(t, h)
		}
		cancel()
	}
}

func TestWaitTimeoutRemovesKey(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "to", 1, Options{})
	h := mustAcquire(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := newSem(t, c, "to", 1, Options{}).Acquire(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("acquire with wait 500ms: %v, want ErrTimeout", err)
	}
	if n := keyCount(t, c, s); n != 1 { // the waiter's key is gone at once (D3)
		t.Fatalf("%d keys after the wait ran out, want 1 (the holder's)", n)
	}
	release(t, h)
}

// TestWaitEndsBeforeFirstAnswer: a wait that has run out before etcd even
// answered (here: before the first request is sent, as a --wait shorter than
// one round trip) still takes a slot that is free at once, like --nonblock;
// with no free slot it is a plain time-out while etcd is up, our key gone;
// with etcd down it is an outage after ConnectTimeout, whatever the wait
// (D3: 75 vs 69). Seen in CI as a 200 ms wait against a slow etcd reported
// as "unavailable".
func TestWaitEndsBeforeFirstAnswer(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	s := newSem(t, c, "early", 1, Options{})
	h, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire of a free slot with an expired wait: %v, want the slot", err)
	}
	if _, err := newSem(t, c, "early", 1, Options{}).Acquire(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("acquire with an expired wait, slot taken, etcd up: %v, want ErrTimeout", err)
	}
	if n := keyCount(t, c, s); n != 1 {
		t.Fatalf("%d keys after the expired wait, want 1 (the holder's)", n)
	}
	release(t, h)

	down, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := newSem(t, down, "early", 1, Options{ConnectTimeout: time.Second}).Acquire(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("acquire with an expired wait, etcd down: %v, want ErrUnavailable", err)
	}
}

func TestUnavailableAtStart(t *testing.T) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newSem(t, c, "down", 1, Options{ConnectTimeout: 500 * time.Millisecond})
	start := time.Now()
	if _, err := s.Acquire(t.Context()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("acquire with etcd down: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("gave up after %v, far past the connect timeout", d)
	}
}

func TestOperatorDeleteOfHolderKey(t *testing.T) { // D7
	_, c := startEtcd(t)
	s := newSem(t, c, "del", 1, Options{})
	h := mustAcquire(t, s)
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(testTimeout):
		t.Fatal("holder not told its key was deleted")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, ErrKeyDeleted) {
		t.Fatalf("cause = %v, want ErrKeyDeleted", cause)
	}
	h.Release(t.Context())
}

func TestLeaseRevokedWhileHolding(t *testing.T) { // D7
	_, c := startEtcd(t)
	s := newSem(t, c, "rev", 1, Options{})
	h := mustAcquire(t, s)
	if _, err := c.Revoke(t.Context(), h.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(testTimeout):
		t.Fatal("holder not told its lease was revoked")
	}
	cause := context.Cause(h.Context())
	if !errors.Is(cause, ErrLeaseLost) && !errors.Is(cause, ErrKeyDeleted) {
		t.Fatalf("cause = %v, want ErrLeaseLost or ErrKeyDeleted", cause)
	}
	h.Release(t.Context())
}

// With etcd gone, a holder fences itself before the server could expire its
// lease: at confirmed + TTL - margin (D7), not at Session.Done() time.
func TestSelfFencingBeforeDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv, c := startEtcd(t)
	s := newSem(t, c, "fence", 1, Options{TTL: 4 * time.Second, FenceMargin: 2 * time.Second})
	h := mustAcquire(t, s)
	stopped := time.Now()
	go srv.Stop() // Close waits for gRPC streams to drain; HardStop is at once
	select {
	case <-h.Context().Done():
	case <-time.After(testTimeout):
		t.Fatal("holder never fenced")
	}
	elapsed := time.Since(stopped)
	if cause := context.Cause(h.Context()); !errors.Is(cause, ErrFenced) {
		t.Fatalf("cause = %v, want ErrFenced", cause)
	}
	// the last confirmed keep-alive was sent before the stop, so the lease
	// deadline is < stopped + TTL; fencing must come margin before that.
	if elapsed >= h.TTL()-time.Second {
		t.Fatalf("fenced %v after etcd stopped, want before TTL - margin/2 (%v)", elapsed, h.TTL()-time.Second)
	}
	h.Release(t.Context())
}

// A waiter whose key an operator deletes re-enters at the back (D7) and
// still gets the slot later.
func TestWaiterKeyDeletedReenters(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "reenter", 1, Options{})
	h := mustAcquire(t, s)
	var mu sync.Mutex
	var events []Event
	w := newSem(t, c, "reenter", 1, Options{OnEvent: func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	ch := acquireAsync(ctx, w)
	waitQueued(t, c, s, 2)
	resp, err := c.Get(t.Context(), s.prefix, append(clientv3.WithLastCreate(), clientv3.WithPrefix())...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("newest key: %v", err)
	}
	first := string(resp.Kvs[0].Key)
	if _, err := c.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, c, s, 2) // re-entered with a new key
	release(t, h)
	r := <-ch
	if r.err != nil {
		t.Fatalf("re-entered waiter: %v", r.err)
	}
	if r.h.Key() == first {
		t.Fatal("re-entered with the deleted key")
	}
	mu.Lock()
	var reentered bool
	for _, e := range events {
		reentered = reentered || (e.Kind == Reentering && errors.Is(e.Err, ErrKeyDeleted))
	}
	mu.Unlock()
	if !reentered {
		t.Fatalf("no Reentering event: %+v", events)
	}
	release(t, r.h)
}

// A waiter that vanishes without cleaning up (its lease simply expires, as
// after SIGKILL) blocks the queue no longer than its TTL.
func TestCrashedWaiterExpires(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "crash", 1, Options{})
	h := mustAcquire(t, s)
	// the "crashed" waiter: a lease with no keep-alive and a key as Acquire writes it
	lr, err := c.Grant(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(t.Context(), schema.LeaseKey(s.prefix, lr.ID), `{"v":1}`, clientv3.WithLease(lr.ID)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	ch := acquireAsync(ctx, newSem(t, c, "crash", 1, Options{}))
	waitQueued(t, c, s, 3)
	release(t, h)
	r := <-ch
	if r.err != nil {
		t.Fatalf("waiter behind a crashed one: %v", r.err)
	}
	release(t, r.h)
}

// An operator's put over a holder's key detaches it from the lease: the
// holder must learn it lost the slot, and its release must still free the
// slot (found by the hostile test: the slot stayed taken for good).
func TestOverwrittenHolderKey(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "ow", 1, Options{})
	h := mustAcquire(t, s)
	if _, err := c.Put(t.Context(), h.Key(), "{bad json"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(testTimeout):
		t.Fatal("holder not told its key was overwritten")
	}
	release(t, h)
	waitQueued(t, c, s, 0)
	release(t, mustAcquire(t, s))
}

// waitHeldSince polls until key's record has held_since (the promoted waiter's rewrite,
// D1, D6) and the key ranks below max under Prefix(name, max).
func waitHeldSince(t *testing.T, c *clientv3.Client, name string, max int, key string) {
	t.Helper()
	polltest.Until(t, testTimeout, "the promoted waiter "+key+" rewriting its record with held_since", func() bool {
		resp, err := c.Get(t.Context(), schema.Prefix(name, max), clientv3.WithPrefix(), byCreateAsc)
		if err != nil {
			t.Fatal(err)
		}
		for i, kv := range resp.Kvs {
			if string(kv.Key) == key {
				r := schema.DecodeRecord(kv.Value)
				return i < max && r.Err == nil && r.HeldSince != nil
			}
		}
		return false
	})
}
