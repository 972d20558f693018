package etcdtest

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
)

// StartCluster starts an n-member etcd cluster in the test process (each
// member with its data in t.TempDir(), Start's fast timers) and stops it in
// t.Cleanup: every member HardStopped, then closed in parallel, so no
// leadership transfer slows the teardown. Members can be stopped (Stop)
// and restarted (Restart) one by one. A start that fails (a random port
// taken between probe and bind) is retried on new ports, 5 attempts in all.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	var lastErr error
	for range 5 {
		members, err := startCluster(t, n)
		if err == nil {
			t.Cleanup(func() { stopAll(members) })
			return members
		}
		lastErr = err
	}
	t.Fatalf("etcdtest: cannot start a %d-member cluster: %v", n, lastErr)
	return nil
}

func startCluster(t testing.TB, n int) ([]*Server, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[3*i+1]))
	}
	members := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		dir := t.TempDir()
		wg.Add(1)
		go func() { // every member must start before any is ready (quorum)
			defer wg.Done()
			members[i], errs[i] = start(dir, func(c *embed.Config) {
				c.Name = fmt.Sprintf("m%d", i)
				cu, pu, mu := loopback(ports[3*i]), loopback(ports[3*i+1]), loopback(ports[3*i+2])
				c.ListenClientUrls, c.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
				c.ListenPeerUrls, c.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
				c.ListenMetricsUrls = []url.URL{mu}
				c.InitialCluster = strings.Join(initial, ",")
				c.InitialClusterToken = fmt.Sprintf("etcdtest-%d", ports[0])
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			stopAll(members)
			return nil, err
		}
	}
	return members, nil
}

func loopback(port int) url.URL { return mustURL(fmt.Sprintf("http://127.0.0.1:%d", port)) }

// stopAll stops the members that started: HardStop on all, then Close in
// parallel (TESTING-INFRA: one by one takes seconds of leadership
// transfers).
func stopAll(members []*Server) {
	var wg sync.WaitGroup
	for _, m := range members {
		if m != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.Stop() }()
		}
	}
	wg.Wait()
}

// Endpoints returns the client URLs of members, comma-separated, as
// --endpoints and CONCH_ENDPOINTS take them.
func Endpoints(members []*Server) string {
	var eps []string
	for _, m := range members {
		eps = append(eps, m.Endpoint)
	}
	return strings.Join(eps, ",")
}
