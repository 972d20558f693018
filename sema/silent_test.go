package sema

import (
	"context"
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
	members := etcdtest.StartCluster(t, 3)
	admin := members[1].Client(t)
	px := newFreezer(t, members[0].Endpoint)
	pxAddr := px.l.Addr().String()
	wc := keepAliveClient(t, pxAddr)
	s := newSem(t, wc, "silent", 1, Options{TTL: 10 * time.Second})
	s.noProbe = !probe
	lease, err := admin.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(t.Context(), leaseKey(s.prefix, lease.ID), `{"v":1}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	// the servers of a process share one metrics registry: a single server shows the
	// watchers of the cluster's members (whose own /metrics leave a connection behind)
	obs := etcdtest.Start(t)
	base := obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total")
	ctx, cancel := context.WithTimeout(t.Context(), 2*testTimeout)
	defer cancel()
	got := acquireAsync(ctx, s)
	poll(t, "the head's two watches", func() bool {
		return obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total") >= base+2
	})
	wc.SetEndpoints(pxAddr, members[1].Endpoint, members[2].Endpoint)
	reachesMembers(t, admin, wc, members[1:])
	px.freeze()
	start := time.Now()
	if _, err := admin.Revoke(t.Context(), lease.ID); err != nil {
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
