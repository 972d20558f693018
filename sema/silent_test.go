package sema

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
	g := newSilentRig(t)
	s := newSem(t, g.wc, "silent", 1, Options{TTL: 10 * time.Second})
	s.noProbe = !probe
	lease, err := g.admin.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.admin.Put(t.Context(), leaseKey(s.prefix, lease.ID), `{"v":1}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	defer cancel()
	got := acquireAsync(ctx, s)
	g.watchers(t, 2, "the head's two watches")
	g.goSilent(t)
	start := time.Now()
	if _, err := g.admin.Revoke(t.Context(), lease.ID); err != nil {
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
	elapsed := silentMemberDelete(t, true)
	t.Logf("holder lost its slot %v after its key's deletion, its watch's member silent", elapsed.Round(time.Millisecond))
	if elapsed >= silentBound {
		t.Fatalf("holder lost its slot %v after its key's deletion: its watch stayed on the silent member", elapsed)
	}
}

// silentMemberDelete runs the scenario of TestHolderLeavesSilentMember and returns how long
// after the delete's start the holder's context ended.
func silentMemberDelete(t *testing.T, probe bool) time.Duration {
	g := newSilentRig(t)
	s := newSem(t, g.wc, "silent", 1, Options{TTL: 10 * time.Second})
	s.noProbe = !probe
	h := mustAcquire(t, s)
	g.watchers(t, 1, "the holder's watch of its key")
	g.goSilent(t)
	start := time.Now()
	if _, err := g.admin.Delete(t.Context(), h.Key()); err != nil {
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

// silentRig is the set-up of the silent-member tests: a 3-member cluster, a client of
// member 1 (admin), and the client under test (wc) whose only endpoint is a freezer in
// front of member 0 until goSilent.
type silentRig struct {
	members []*etcdtest.Server
	admin   *clientv3.Client
	px      *freezer
	wc      *clientv3.Client
	obs     *etcdtest.Server
	base    float64
}

func newSilentRig(t *testing.T) *silentRig {
	g := &silentRig{members: etcdtest.StartCluster(t, 3)}
	g.admin = g.members[1].Client(t)
	g.px = newFreezer(t, g.members[0].Endpoint)
	g.wc = keepAliveClient(t, g.px.l.Addr().String())
	// the servers of a process share one metrics registry: a single server shows the
	// watchers of the cluster's members (whose own /metrics leave a connection behind)
	g.obs = etcdtest.Start(t)
	g.base = g.obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total")
	return g
}

// watchers polls until n more watchers exist than at the start: wc's, all on member 0.
func (g *silentRig) watchers(t *testing.T, n int, what string) {
	poll(t, what, func() bool {
		return g.obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total") >= g.base+float64(n)
	})
}

// goSilent gives wc the two other members, waits until it reaches them, and freezes
// member 0's proxy: wc's watches there go silent, their connection open.
func (g *silentRig) goSilent(t *testing.T) {
	g.wc.SetEndpoints(g.px.l.Addr().String(), g.members[1].Endpoint, g.members[2].Endpoint)
	reachesMembers(t, g.admin, g.wc, g.members[1:])
	g.px.freeze()
}

// keepAliveClient is a client of endpoint with conch's gRPC keep-alive (etcdconn).
func keepAliveClient(t *testing.T, endpoint string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{endpoint},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// reachesMembers polls until reads through c have been answered by each of members (the
// round robin has connections to them).
func reachesMembers(t *testing.T, admin, c *clientv3.Client, members []*etcdtest.Server) {
	ml, err := admin.MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for _, m := range ml.Members {
		for _, u := range m.ClientURLs {
			for _, s := range members {
				if u == s.Endpoint {
					want[m.ID] = true
				}
			}
		}
	}
	poll(t, "reads answered by the live members", func() bool {
		rctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if resp, err := c.Get(rctx, "health"); err == nil {
			delete(want, resp.Header.MemberId)
		}
		return len(want) == 0
	})
}

func poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A holder's release whose revoke goes to a member that stops answering frees the slot about
// a second later, its try given up and sent again to a live member, not after a 5 s first try
// (D7b (3)). The holder's client is steered so that its revoke goes to the silent member:
// a read that gets no answer shows where the round robin is. Same set-up as
// TestHeadLeavesSilentMember, the head on a live member; it fails with the checks off.
func TestReleaseLeavesSilentMember(t *testing.T) {
	elapsed := silentMemberRelease(t, true)
	t.Logf("head promoted %v after the release began, the holder's revoke sent to the silent member", elapsed.Round(time.Millisecond))
	if elapsed >= 3*time.Second {
		t.Fatalf("head promoted %v after the release began: the revoke waited on the silent member", elapsed)
	}
}

// silentMemberRelease runs the scenario of TestReleaseLeavesSilentMember and returns how
// long after the release began the head's Acquire returned.
func silentMemberRelease(t *testing.T, probe bool) time.Duration {
	g := newSilentRig(t)
	s := newSem(t, g.wc, "silent", 1, Options{TTL: 10 * time.Second})
	s.noProbe = !probe
	h := mustAcquire(t, s)
	w := newSem(t, g.admin, "silent", 1, Options{TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	defer cancel()
	got := acquireAsync(ctx, w)
	waitQueued(t, g.admin, w, 2)
	g.goSilent(t)
	// the holder's streams that were on the silent member move (its watch within about a
	// second, its keep-alive stream after one unanswered interval, 1 s): after that only
	// the reads below and the revoke take turns in wc's round robin
	time.Sleep(3 * time.Second)
	steerToSilent(t, g.wc)
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

// Follow, whose watches sit on a member that stops answering (its connection open), shows a
// change made through another member within about a second, and says nothing of it: a
// member's failure while the others keep quorum is not etcd lost. Same set-up as
// TestHeadLeavesSilentMember. Without the stream check the change waits for gRPC's keep-alive
// (13 s); without the probe's and the read's second tries, a try that meets the silent member
// reports etcd lost.
func TestFollowLeavesSilentMember(t *testing.T) {
	g := newSilentRig(t)
	type seen struct {
		rev int64
		at  time.Time
	}
	listings := make(chan seen, 64)
	var lost atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, g.wc, "silentf", FollowHandler{
			Listing: func(l Listing) error { listings <- seen{l.Rev, time.Now()}; return nil },
			Note: func(n Note) {
				if n.Kind == NoteLost {
					lost.Add(1)
				}
			},
		})
	}()
	defer func() { cancel(); <-done }()
	<-listings // the first read
	g.watchers(t, 3, "the follower's three watches")
	g.goSilent(t)
	start := time.Now()
	resp, err := g.admin.Put(t.Context(), Prefix("silentf", 1)+"hand-written", "x")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * testTimeout)
	for {
		select {
		case s := <-listings:
			if s.rev < resp.Header.Revision {
				continue
			}
			elapsed := s.at.Sub(start)
			t.Logf("the change was shown %v after the put, its watches' member silent", elapsed.Round(time.Millisecond))
			// each new stream may land on the silent member again (the round robin), a
			// second behind each time: a bound between that and gRPC's 13 s
			if elapsed >= 9*time.Second {
				t.Fatalf("the change was shown %v after the put: the watches stayed on the silent member", elapsed)
			}
			if n := lost.Load(); n > 0 {
				t.Errorf("Follow reported etcd lost %d times; one silent member of three is not etcd lost", n)
			}
			return
		case <-deadline:
			t.Fatal("the change was never shown")
		}
	}
}

// A holder whose key's watch left a silent member watches on from its new stream: the new
// watch gets etcd's progress notifications, so it is not taken for silent again and again
// (a watch that starts past etcd's current revision gets none).
func TestHolderSettlesAfterSilentMember(t *testing.T) {
	g := newSilentRig(t)
	s := newSem(t, g.wc, "settle", 1, Options{TTL: 10 * time.Second})
	var watches atomic.Int32 // the watches of the holder's key made so far
	SetKeyWatched(s, func() { watches.Add(1) })
	h := mustAcquire(t, s)
	defer release(t, h)
	g.watchers(t, 1, "the holder's watch of its key")
	g.goSilent(t)
	poll(t, "the holder's watch made again", func() bool { return watches.Load() >= 2 })
	settled := watches.Load()
	time.Sleep(4 * time.Second) // the span judged: a watch found silent is made again within 1 s
	if n := watches.Load() - settled; n > 1 {
		t.Errorf("%d more watches of the key in 4 s after it left the silent member; want at most 1", n)
	}
}
