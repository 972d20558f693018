package sema

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/sema/schema"
)

// A member that stops answering without closing its connections (stopped, frozen, cut off
// without a reset) must not keep the head of the queue from its turn until gRPC's keep-alive
// gives up on the connection (10 s + 3 s): the head's watch is checked and made again on a
// live member (D7b (3)). The head's watch is on member 0 (its only endpoint then), behind a
// proxy that stops forwarding without closing anything; the other members are added, the
// proxy frozen, and the holder released through another member at once: the worst case,
// where nothing was noticed before the release. It fails with the check off (SetNoProbe):
// the head then starts after the keep-alive's 13 s.
func TestHeadLeavesSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	elapsed := silentMemberHandoff(t, true)
	t.Logf("head promoted %v after the release, its watch's member silent", elapsed.Round(time.Millisecond))
	if elapsed >= silentBound {
		t.Fatalf("head promoted %v after the release: its watch stayed on the silent member (gRPC keep-alive moved it)", elapsed)
	}
}

// silentBound is well under gRPC's keep-alive (10 s at least) and well over the check's
// own bound (about 1.5 s), so that a loaded machine does not make the test flaky.
const silentBound = 6 * time.Second

// silentMemberHandoff runs the scenario of TestHeadLeavesSilentMember and returns how long
// after the release (the revoke's start) the head's Acquire returned.
func silentMemberHandoff(t *testing.T, probe bool) time.Duration {
	g := etcdtest.StartSilentRig(t)
	s := newSem(t, g.WC, "silent", 1, Options{TTL: 10 * time.Second})
	SetNoProbe(s, !probe)
	lease, err := g.Admin.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admin.Put(t.Context(), schema.LeaseKey(s.prefix, lease.ID), `{"v":1}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	defer cancel()
	got := acquireAsync(ctx, s)
	g.Watchers(t, 2, "the head's two watches")
	g.GoSilent(t)
	start := time.Now()
	if _, err := g.Admin.Revoke(t.Context(), lease.ID); err != nil {
		t.Fatal(err)
	}
	a := <-got
	elapsed := time.Since(start)
	if a.err != nil {
		t.Fatalf("acquire: %v", a.err)
	}
	release(t, a.h)
	return elapsed
}

// A holder whose watch of its own key sits on a member that stops answering still learns
// of the key's deletion (an operator's) within about a second, not when gRPC's keep-alive
// gives up on the connection: another holder may run already (D7, D7b (3)). Same set-up as
// TestHeadLeavesSilentMember; it fails with the check off (SetNoProbe).
func TestHolderLeavesSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	elapsed := silentMemberDelete(t, true)
	t.Logf("holder lost its slot %v after its key's deletion, its watch's member silent", elapsed.Round(time.Millisecond))
	if elapsed >= silentBound {
		t.Fatalf("holder lost its slot %v after its key's deletion: its watch stayed on the silent member", elapsed)
	}
}

// silentMemberDelete runs the scenario of TestHolderLeavesSilentMember and returns how long
// after the delete's start the holder's context ended.
func silentMemberDelete(t *testing.T, probe bool) time.Duration {
	g := etcdtest.StartSilentRig(t)
	s := newSem(t, g.WC, "silent", 1, Options{TTL: 10 * time.Second})
	SetNoProbe(s, !probe)
	h := mustAcquire(t, s)
	g.Watchers(t, 1, "the holder's watch of its key")
	g.GoSilent(t)
	start := time.Now()
	if _, err := g.Admin.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(2 * testTimeout):
		t.Fatal("the holder never saw its key deleted")
	}
	elapsed := time.Since(start)
	if !errors.Is(context.Cause(h.Context()), ErrKeyDeleted) {
		t.Fatalf("holder lost its slot with %v, want ErrKeyDeleted", context.Cause(h.Context()))
	}
	_ = h.Release(t.Context()) // the key is gone already
	return elapsed
}

// A holder's release whose revoke goes to a member that stops answering frees the slot about
// a second later, its try given up and sent again to a live member, not after a 5 s first try
// (D7b (3)). The holder's client is steered so that its revoke goes to the silent member:
// a read that gets no answer shows where the round robin is. Same set-up as
// TestHeadLeavesSilentMember, the head on a live member; it fails with the checks off.
func TestReleaseLeavesSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	elapsed := silentMemberRelease(t, true)
	t.Logf("head promoted %v after the release began, the holder's revoke sent to the silent member", elapsed.Round(time.Millisecond))
	if elapsed >= 3*time.Second {
		t.Fatalf("head promoted %v after the release began: the revoke waited on the silent member", elapsed)
	}
}

// silentMemberRelease runs the scenario of TestReleaseLeavesSilentMember and returns how
// long after the release began the head's Acquire returned.
func silentMemberRelease(t *testing.T, probe bool) time.Duration {
	g := etcdtest.StartSilentRig(t)
	var renewed, watches atomic.Int32 // the holder's confirmed keep-alives, watches of its key
	s := newSem(t, g.WC, "silent", 1, Options{TTL: 10 * time.Second, OnRenew: func(_, _ time.Time) { renewed.Add(1) }})
	SetNoProbe(s, !probe)
	SetKeyWatched(s, func() { watches.Add(1) })
	h := mustAcquire(t, s)
	w := newSem(t, g.Admin, "silent", 1, Options{TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	defer cancel()
	got := acquireAsync(ctx, w)
	waitQueued(t, g.Admin, w, 2)
	g.GoSilent(t)
	// the holder's streams that were on the silent member move (its watch within about a
	// second, its keep-alive stream after one unanswered interval, 1 s): after that only
	// the reads below and the revoke take turns in wc's round robin. Two keep-alives
	// confirmed after the freeze: at least one went over a live member's stream.
	silentAt := renewed.Load()
	if probe {
		polltest.Until(t, testTimeout, "the holder's watch made again off the silent member", func() bool { return watches.Load() >= 2 })
	}
	polltest.Until(t, testTimeout, "the holder's keep-alive confirmed again after the freeze", func() bool { return renewed.Load() >= silentAt+2 })
	steerToSilent(t, g.WC)
	start := time.Now()
	release(t, h)
	a := <-got
	elapsed := time.Since(start)
	if a.err != nil {
		t.Fatalf("acquire: %v", a.err)
	}
	release(t, a.h)
	return elapsed
}

// steerToSilent reads through c until a read gets no answer (it went to the silent member),
// then reads once from each of the two live members: c's next request goes to the silent one.
func steerToSilent(t *testing.T, c *clientv3.Client) {
	for i := 0; ; i++ {
		rctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := c.Get(rctx, "health")
		cancel()
		if err != nil {
			break
		}
		if i == 20 {
			t.Fatal("no read went to the silent member")
		}
	}
	for range 2 {
		rctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		_, err := c.Get(rctx, "health")
		cancel()
		if err != nil {
			t.Fatalf("a read after the silent member's turn: %v", err)
		}
	}
}

// A holder whose key's watch left a silent member watches on from its new stream: the new
// watch gets etcd's progress notifications, so it is not taken for silent again and again
// (a watch that starts past etcd's current revision gets none).
func TestHolderSettlesAfterSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	g := etcdtest.StartSilentRig(t)
	s := newSem(t, g.WC, "settle", 1, Options{TTL: 10 * time.Second})
	var watches atomic.Int32 // the watches of the holder's key made so far
	SetKeyWatched(s, func() { watches.Add(1) })
	h := mustAcquire(t, s)
	defer release(t, h)
	g.Watchers(t, 1, "the holder's watch of its key")
	g.GoSilent(t)
	polltest.Until(t, testTimeout, "the holder's watch made again", func() bool { return watches.Load() >= 2 })
	settled := watches.Load()
	time.Sleep(4 * time.Second) // the span judged: a watch found silent is made again within 1 s
	if n := watches.Load() - settled; n > 1 {
		t.Errorf("%d more watches of the key in 4 s after it left the silent member; want at most 1", n)
	}
}
