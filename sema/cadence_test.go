package sema

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/metrics"
)

func TestWaitKeepAliveBounds(t *testing.T) {
	t.Parallel()
	ttl := 10 * time.Second
	for _, tc := range []struct {
		d, want time.Duration
	}{
		{0, ttl / 6},                       // default (D7h)
		{-time.Second, ttl / 6},            // nonsense: default
		{time.Minute, ttl / 3},             // slower than TTL/3: clamped (two keep-alives before expiry)
		{2 * time.Second, 2 * time.Second}, // in range
		{time.Nanosecond, time.Second},     // faster than the holders' min(TTL/6, 1 s): clamped
	} {
		if got := waitKeepAlive(tc.d, ttl); got != tc.want {
			t.Errorf("waitKeepAlive(%v, %v) = %v, want %v", tc.d, ttl, got, tc.want)
		}
	}
	if got := waitKeepAlive(0, 3*time.Second); got != 500*time.Millisecond {
		t.Errorf("waitKeepAlive(0, 3s) = %v, want 500ms", got)
	}
}

// A waiting lease on the slow cadence (TTL/3) stays alive on a
// real etcd over three TTLs, and sends no more keep-alives than that
// cadence allows (the holders' cadence would send twice as many).
func TestWaitingLeaseSurvivesSlowCadence(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv, c := startEtcd(t)
	ttl := 2 * time.Second
	l, err := grantLease(t.Context(), c, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	l.setWaitInterval(time.Hour) // clamped to the slowest, TTL/3
	if iv := l.interval(); iv != l.ttl/3 {
		t.Fatalf("waiting interval %v, want TTL/3 = %v", iv, l.ttl/3)
	}
	m0 := srv.Scrape(t)
	window := 3 * l.ttl
	select {
	case <-l.Done():
		t.Fatalf("waiting lease lost on the slow cadence: %v", l.Err())
	case <-time.After(window): // negative check over three TTLs
	}
	m1 := srv.Scrape(t)
	ttlResp, err := c.TimeToLive(t.Context(), l.id)
	if err != nil {
		t.Fatal(err)
	}
	if ttlResp.TTL <= 0 {
		t.Fatalf("server says the lease is gone (TTL %d)", ttlResp.TTL)
	}
	sent := metrics.Delta(m0, m1).Sum("grpc_server_msg_received_total", `grpc_method="LeaseKeepAlive"`)
	if most := float64(window/l.interval()) + 2; sent < 1 || sent > most {
		t.Fatalf("%v keep-alives in %v, want 1..%v (TTL/3 cadence)", sent, window, most)
	}
}

// A waiter behind the head (slow cadence) whose lease is lost re-enters
// from step 1 with a new lease and key at the back, and is still served
// (04_sema.md "Failure behavior").
func TestLostWaiterReenters(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	opts := Options{TTL: 2 * time.Second}
	holder := mustAcquire(t, newSem(t, c, "lost", 1, opts))
	head := newSem(t, c, "lost", 1, opts)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	headCh := acquireAsync(ctx, head)
	waitQueued(t, c, head, 2)
	events := make(chan Event, 64)
	opts.OnEvent = func(e Event) { events <- e }
	w := newSem(t, c, "lost", 1, opts)
	wCh := acquireAsync(ctx, w)
	first := nextEvent(t, events, Waiting)
	if first.Ahead != 1 {
		t.Fatalf("waiter is %d behind the head, want 1 (not the head: slow cadence)", first.Ahead)
	}
	if _, err := c.Revoke(t.Context(), first.Lease); err != nil {
		t.Fatal(err)
	}
	re := nextEvent(t, events, Reentering)
	if !errors.Is(re.Err, ErrLeaseLost) && !errors.Is(re.Err, ErrKeyDeleted) {
		t.Fatalf("re-entered because of %v, want ErrLeaseLost or ErrKeyDeleted", re.Err)
	}
	again := nextEvent(t, events, Enqueued)
	if again.Lease == first.Lease || again.Rev <= first.Rev {
		t.Fatalf("re-entered with lease %x rev %d, first life lease %x rev %d: want a new lease and a later key", again.Lease, again.Rev, first.Lease, first.Rev)
	}
	waitQueued(t, c, head, 3) // holder, head, our new key: the old one is gone
	release(t, holder)
	hr := <-headCh
	if hr.err != nil {
		t.Fatal(hr.err)
	}
	release(t, hr.h)
	wr := <-wCh
	if wr.err != nil {
		t.Fatalf("lost waiter not served after re-entry: %v", wr.err)
	}
	if wr.h.rev != again.Rev {
		t.Fatalf("held with rev %d, want the re-entered key's %d", wr.h.rev, again.Rev)
	}
	release(t, wr.h)
}

// nextEvent returns the next event of kind from ch, skipping others.
func nextEvent(t *testing.T, ch <-chan Event, kind EventKind) Event {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no event of kind %d", kind)
		}
	}
}
