package who

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// snapshot, leaseTTLs and summarize against real holders, a waiter, a
// --spread node waiter and a pause key.
func TestSnapshotSummary(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := sematest.NewSem(t, c, "sum", 2, sema.Options{})
	h1, h2 := sematest.MustAcquire(t, s), sematest.MustAcquire(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	waiter := sematest.AcquireAsync(ctx, s)
	etcdtest.WaitKeys(t, c, schema.Prefix("sum", 2), 3, sematest.Timeout)
	sp := sematest.NewSem(t, c, "sum", 3, sema.Options{Spread: true, Node: "n1", AllowOtherCapacity: true}) // D17: two capacities on purpose
	hs := sematest.MustAcquire(t, sp)
	spWaiter := sematest.AcquireAsync(ctx, sp)
	polltest.Until(t, sematest.Timeout, "the node waiter's marker", func() bool { return etcdtest.KeysUnder(t, c, schema.NodeWaitRoot) == 1 })
	if _, err := c.Put(t.Context(), schema.PauseRoot+"sum/2", `{"why":"test"}`); err != nil {
		t.Fatal(err)
	}
	l, err := snapshot(t.Context(), c, "sum")
	if err != nil {
		t.Fatal(err)
	}
	leaseTTLs(t.Context(), c, l.Entries)
	for _, e := range l.Entries {
		if e.Held != e.TTL.Known || e.Held && (e.TTL.Left <= 0 || e.TTL.Expiring()) {
			t.Errorf("entry %s held=%v TTL %+v", e.Key, e.Held, e.TTL)
		}
	}
	sums := summarize(l)
	want := []summary{{Name: "sum", Max: 2, Holders: 2, Waiters: 1, Paused: true}, {Name: "sum", Max: 3, Holders: 1, Waiters: 1}}
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
	for _, ch := range []<-chan sematest.Acquired{waiter, spWaiter} {
		if a := <-ch; a.Err == nil {
			a.H.Release(t.Context())
		}
	}
	for _, h := range []*sema.Holder{h1, h2, hs} {
		sematest.Release(t, h)
	}
}

// followListing: one call per change or burst, a bounded number for a burst of
// 200, and it ends with ctx, its goroutines joined (goleak in TestMain).
func TestFollowCoalescesAndEnds(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Listing, 1000)
	done := make(chan error, 1)
	go func() {
		done <- followListing(ctx, c, "fo", followHandler{Listing: func(l Listing) error { got <- l; return nil }})
	}()
	<-got // the first listing
	began := time.Now()
	for i := range 200 {
		if _, err := c.Put(t.Context(), fmt.Sprintf("%sk%03d", schema.Prefix("fo", 1), i), "{}"); err != nil {
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
		t.Fatalf("followListing ended with %v", err)
	}
}
