package sema

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot, LeaseTTLs and Summarize against real holders, a waiter, a
// --spread node waiter and a pause key.
func TestSnapshotSummary(t *testing.T) {
	_, c := startEtcd(t)
	s := newSem(t, c, "sum", 2, Options{})
	h1, h2 := mustAcquire(t, s), mustAcquire(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	waiter := acquireAsync(ctx, s)
	waitQueued(t, c, s, 3)
	sp := newSem(t, c, "sum", 3, Options{Spread: true, Node: "n1", AllowOtherCapacity: true}) // D17: two capacities on purpose
	hs := mustAcquire(t, sp)
	spWaiter := acquireAsync(ctx, sp)
	waitFor(t, "the node waiter's marker", func() bool { return countUnder(t, c, NodeWaitRoot) == 1 })
	if _, err := c.Put(t.Context(), PauseRoot+"sum/2", `{"why":"test"}`); err != nil {
		t.Fatal(err)
	}
	l, err := Snapshot(t.Context(), c, "sum")
	if err != nil {
		t.Fatal(err)
	}
	LeaseTTLs(t.Context(), c, l.Entries)
	for _, e := range l.Entries {
		if e.Held != e.TTL.Known || e.Held && (e.TTL.Left <= 0 || e.TTL.Expiring()) {
			t.Errorf("entry %s held=%v TTL %+v", e.Key, e.Held, e.TTL)
		}
	}
	sums := Summarize(l)
	want := []Summary{{Name: "sum", Max: 2, Holders: 2, Waiters: 1, Paused: true}, {Name: "sum", Max: 3, Holders: 1, Waiters: 1}}
	if len(sums) != 2 {
		t.Fatalf("summaries %+v", sums)
	}
	for i, w := range want {
		g := sums[i]
		if g.Name != w.Name || g.Max != w.Max || g.Holders != w.Holders || g.Waiters != w.Waiters || g.Paused != w.Paused || g.OldestHolder.IsZero() || g.OldestWaiter.IsZero() {
			t.Errorf("summary %d = %+v, want %+v", i, g, w)
		}
	}
	cancel()
	for _, ch := range []<-chan acquired{waiter, spWaiter} {
		if a := <-ch; a.err == nil {
			a.h.Release(t.Context())
		}
	}
	for _, h := range []*Holder{h1, h2, hs} {
		release(t, h)
	}
}

// CheckHeld's answer and reasons, for a lease key and a --spread key.
func TestCheckHeldReasons(t *testing.T) {
	_, c := startEtcd(t)
	for _, opts := range []Options{{}, {Spread: true, Node: "n1"}} {
		s := newSem(t, c, fmt.Sprintf("ck%v", opts.Spread), 1, opts)
		h := mustAcquire(t, s)
		slot := Slot{Name: s.name, Max: 1, Lease: int64(h.Lease()), Rev: h.Rev()}
		if got, err := CheckHeld(t.Context(), c, slot); err != nil || got.Rank != 0 || got.Key != h.Key() || !got.TTL.Known {
			t.Fatalf("held: %+v %v", got, err)
		}
		forged := slot
		forged.Rev += 1000
		checkReason(t, c, forged, ErrHeldOtherRev)
		if _, err := c.Delete(t.Context(), h.Key()); err != nil {
			t.Fatal(err)
		}
		checkReason(t, c, slot, ErrHeldKeyGone)
		if _, err := c.Revoke(t.Context(), h.Lease()); err != nil {
			t.Fatal(err)
		}
		checkReason(t, c, slot, ErrHeldLeaseGone)
		h.Release(t.Context())
	}
	s := newSem(t, c, "ckq", 1, Options{})
	h := mustAcquire(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := acquireAsync(ctx, s)
	waitQueued(t, c, s, 2)
	resp, err := c.Get(t.Context(), s.prefix, clientv3.WithPrefix(), byCreateAsc)
	if err != nil {
		t.Fatal(err)
	}
	checkReason(t, c, Slot{Name: "ckq", Max: 1, Lease: resp.Kvs[1].Lease, Rev: resp.Kvs[1].CreateRevision}, ErrHeldNotWithin)
	release(t, h)
	if a := <-w; a.err != nil {
		t.Fatal(a.err)
	} else {
		release(t, a.h)
	}
}

func checkReason(t *testing.T, c *clientv3.Client, s Slot, reason error) {
	t.Helper()
	if _, err := CheckHeld(t.Context(), c, s); !errors.Is(err, ErrNotHeld) || !errors.Is(err, reason) {
		t.Fatalf("CheckHeld(%+v) = %v, want %v", s, err, reason)
	}
}

// Follow: one call per change or burst, a bounded number for a burst of
// 200, and it ends with ctx, its goroutines joined (goleak in TestMain).
func TestFollowCoalescesAndEnds(t *testing.T) {
	_, c := startEtcd(t)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Listing, 1000)
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, c, "fo", FollowHandler{Listing: func(l Listing) error { got <- l; return nil }})
	}()
	<-got // the first listing
	began := time.Now()
	for i := range 200 {
		if _, err := c.Put(t.Context(), fmt.Sprintf("%sk%03d", Prefix("fo", 1), i), "{}"); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	calls := 0
	for l := range got {
		calls++
		if len(l.Entries) == 200 {
			break
		}
	}
	if limit := int(took/followMaxDelay) + 3; calls > limit {
		t.Fatalf("%d calls for a burst of 200 changes in %v, want at most %d", calls, took, limit)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow ended with %v", err)
	}
}

func countUnder(t *testing.T, c *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := c.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
