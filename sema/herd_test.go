package sema

import (
	"context"
	"testing"
)

// TestHerdFreeLongQueue queues 60 waiters behind 3 holders and releases one
// holder at a time: each release must wake at most 2 waiters, so the server
// sends at most 3 watch events per release whatever the queue length (D1).
// A recount-on-every-delete design would send about 60 per release. With
// D1a's watches (served at once, with a re-read) no watcher is ever in etcd's
// unsynced group (etcd_debugging_mvcc_slow_watcher_total is 0 at every
// hand-off), since none starts at a revision the store has passed.
func TestHerdFreeLongQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv, c := startEtcd(t)
	const n, w = 3, 60
	newS := func() *Semaphore { return newSem(t, c, "herd", n, Options{}) }
	s := newS()
	var holders []*Holder
	for range n {
		holders = append(holders, mustAcquire(t, s))
	}
	// the waiters' bound covers the whole drain: 60 hand-offs one after the other, which
	// took over a minute under -race on the loaded machine
	ctx, cancel := context.WithTimeout(t.Context(), 5*testTimeout)
	defer cancel()
	var waiters []<-chan acquired
	for i := range w {
		waiters = append(waiters, acquireAsync(ctx, newS()))
		waitQueued(t, c, s, n+i+1)
	}
	before := serverEvents(t, srv)
	var slow float64
	for i := range w {
		release(t, holders[0])
		r := <-waiters[i] // strictly in queue order
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		holders = append(holders[1:], r.h)
		slow += srv.Scrape(t).Sum("etcd_debugging_mvcc_slow_watcher_total")
	}
	events := serverEvents(t, srv) - before
	t.Logf("%d watch events for %d releases with %d..1 waiters queued (%.2f per release); unsynced watchers seen at hand-offs: %v",
		events, w, w, float64(events)/w, slow)
	if events > 3*w {
		t.Fatalf("%d watch events for %d releases: more than 3 per release (D1)", events, w)
	}
	if slow != 0 {
		t.Fatalf("%v unsynced watchers seen at hand-offs, want none (D1a)", slow)
	}
	for _, h := range holders {
		release(t, h)
	}
}

// D2: an uncontended acquire + release is LeaseGrant, the enqueue Txn and
// LeaseRevoke: 3 unary requests (keep-alives and watches are streams),
// counted by the server itself.
func TestUncontendedThreeRequests(t *testing.T) {
	srv, c := startEtcd(t)
	s := newSem(t, c, "d2", 3, Options{})
	for i := range 5 {
		before := int(srv.Scrape(t).Sum("grpc_server_handled_total", `grpc_type="unary"`))
		h := mustAcquire(t, s)
		release(t, h)
		if n := int(srv.Scrape(t).Sum("grpc_server_handled_total", `grpc_type="unary"`)) - before; n != 3 {
			t.Fatalf("run %d: %d unary requests for acquire+release, want 3 (D2)", i, n)
		}
	}
}
