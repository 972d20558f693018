package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/conch-project/conch/internal/polltest"
)

// silentWithin bounds the rig's waits: a loaded machine can be slow.
const silentWithin = 60 * time.Second

// SilentRig is the set-up of the silent-member tests: a 3-member cluster, a client of
// member 1 (admin), and the client under test (wc) whose only endpoint is a freezer in
// front of member 0 until goSilent.
type SilentRig struct {
	Members []*Server
	Admin   *clientv3.Client
	px      *Freezer
	WC      *clientv3.Client
	obs     *Server
	base    float64
}

// StartSilentRig starts the cluster, the freezer and the clients, all stopped in t.Cleanup.
func StartSilentRig(t testing.TB) *SilentRig {
	g := &SilentRig{Members: StartCluster(t, 3)}
	g.Admin = g.Members[1].Client(t)
	g.px = NewFreezer(t, g.Members[0].Endpoint)
	g.WC = keepAliveClient(t, g.px.Addr())
	// the servers of a process share one metrics registry: a single server shows the
	// watchers of the cluster's members (whose own /metrics leave a connection behind)
	g.obs = Start(t)
	g.base = g.obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total")
	return g
}

// Watchers polls until n more watchers exist than at the start: wc's, all on member 0.
func (g *SilentRig) Watchers(t testing.TB, n int, what string) {
	polltest.Until(t, silentWithin, what, func() bool {
		return g.obs.Scrape(t).Sum("etcd_debugging_mvcc_watcher_total") >= g.base+float64(n)
	})
}

// GoSilent gives wc the two other members, waits until it reaches them, and freezes
// member 0's proxy: wc's watches there go silent, their connection open.
func (g *SilentRig) GoSilent(t testing.TB) {
	g.WC.SetEndpoints(g.px.Addr(), g.Members[1].Endpoint, g.Members[2].Endpoint)
	reachesMembers(t, g.Admin, g.WC, g.Members[1:])
	g.px.Freeze()
}

// keepAliveClient is a client of endpoint with conch's gRPC keep-alive (etcdconn).
func keepAliveClient(t testing.TB, endpoint string) *clientv3.Client {
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
func reachesMembers(t testing.TB, admin, c *clientv3.Client, members []*Server) {
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
	polltest.Until(t, silentWithin, "reads answered by the live members", func() bool {
		rctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if resp, err := c.Get(rctx, "health"); err == nil {
			delete(want, resp.Header.MemberId)
		}
		return len(want) == 0
	})
}
