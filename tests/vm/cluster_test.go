package vm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/sema/schema"
)

// The multi-node harness: 3 nodes (systemd-nspawn machines), each in a network namespace of
// its own on a private bridge (systemdtest.Network), an etcd member in each node
// (systemdtest.EtcdCluster, heartbeat 50 ms, election 500 ms) and conch run as transient
// services of the nodes with the node's own member first in --endpoints. One cluster serves
// every scenario of TestMultiNode: each uses its own semaphore name, and heal puts back what
// its faults took away.

const (
	clusterSize  = 3
	histMount    = "/hist" // the history folder inside every node
	histchild    = systemdtest.BinMount + "/histchild"
	scenarioTime = 3 * time.Minute // one scenario, faults and recovery included
)

// cluster is the shared 3-node setup.
type cluster struct {
	nw    *systemdtest.Network
	nodes []*systemdtest.Node
	etcd  *systemdtest.EtcdCluster
	cli   *clientv3.Client // the test binary's client of all members
	// members are clients of one member each (member i: members[i]); ids are the members'
	// IDs, as a Status names the leader.
	members []*clientv3.Client
	ids     []uint64
	hist    string // the history folder on the host
	rec     *recorder
	obs     *observer
}

// newCluster builds conch, etcd and histchild, creates the network, boots the nodes in
// parallel, starts the members and the history's recorder and observer. Everything is removed
// at t's cleanup, also when t fails. It logs how long each step took.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	began := time.Now()
	bins := systemdtest.BuildBinaries(t, "./cmd/conch", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3",
		"./tests/vm/testdata/histchild", "./tests/vm/testdata/fleetclient")
	built := time.Now()
	c := &cluster{hist: t.TempDir()}
	if err := os.Chmod(c.hist, 0o777); err != nil {
		t.Fatal(err)
	}
	c.nw = systemdtest.NewNetwork(t, clusterSize)
	var opts []systemdtest.Options
	for i := range clusterSize {
		opts = append(opts, systemdtest.Options{Name: fmt.Sprintf("mn%d", i+1), BinDir: bins, NetNS: c.nw.NSPath(i),
			Binds: []systemdtest.Bind{{Host: c.hist, Node: histMount, Writable: true}}})
	}
	c.nodes = systemdtest.BootAll(t, opts...)
	booted := time.Now()
	c.etcd = systemdtest.StartEtcdCluster(t, c.nw, c.nodes, systemdtest.BinMount+"/server")
	c.cli = c.etcd.Client()
	c.rec = newRecorder(c.hist, c.nodeMap)
	t.Cleanup(c.rec.close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := c.cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	for i := range clusterSize {
		c.members = append(c.members, c.etcd.Client(i))
		st, err := c.members[i].Status(ctx, c.etcd.Endpoint(i))
		if err != nil {
			t.Fatal(err)
		}
		c.ids = append(c.ids, st.Header.MemberId)
	}
	c.obs = newObserver(c.members, schema.KeyRoot, resp.Header.Revision+1)
	t.Cleanup(c.obs.close)
	t.Logf("setup: built in %v, network and %d nodes in %v, etcd cluster in %v", ms(built.Sub(began)),
		clusterSize, ms(booted.Sub(built)), ms(time.Since(booted)))
	return c
}

func (c *cluster) nodeMap() map[string]*systemdtest.Node {
	m := map[string]*systemdtest.Node{}
	for _, n := range c.nodes {
		m[n.Name()] = n
	}
	return m
}

// scenario is one subtest's view of the cluster.
type scenario struct {
	*cluster
	t    *testing.T
	ctx  context.Context
	name string // the semaphore's name
	max  int
	jobs []*systemdtest.Proc
	jn   []int // node of each job
}

// newScenario starts a scenario on semaphore name with capacity max. Its cleanup kills what it
// left running and heals every fault (network, freeze, dead node or member), so the next
// scenario finds a whole cluster.
func (c *cluster) newScenario(t *testing.T, name string, max int) *scenario {
	ctx, cancel := context.WithTimeout(t.Context(), scenarioTime)
	s := &scenario{cluster: c, t: t, ctx: ctx, name: name, max: max}
	t.Cleanup(func() {
		defer cancel()
		s.killJobs()
		if err := c.heal(); err != nil {
			t.Errorf("cannot heal the cluster after %s: %v", t.Name(), err)
		}
	})
	return s
}

// conch starts `conch ARGS...` on node i as a transient service, with the node's own member
// first in CONCH_ENDPOINTS, and returns at once.
func (s *scenario) conch(i int, args ...string) *systemdtest.Proc {
	s.t.Helper()
	eps := "CONCH_ENDPOINTS=" + strings.Join(s.etcd.Endpoints(i), ",")
	p, err := s.nodes[i].StartWith(s.ctx, systemdtest.RunOptions{Env: []string{eps}}, append([]string{conch}, args...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.jobs = append(s.jobs, p)
	s.jn = append(s.jn, i)
	return p
}

// job starts `conch sema NAME --max MAX FLAGS... -- histchild CHILD...` on node i.
func (s *scenario) job(i int, flags []string, child ...string) *systemdtest.Proc {
	s.t.Helper()
	args := append([]string{"sema", s.name, "--max", fmt.Sprint(s.max)}, flags...)
	args = append(append(args, "--", histchild, "-dir", histMount), child...)
	return s.conch(i, args...)
}

// killJobs SIGKILLs the units of the scenario's jobs that still run.
func (s *scenario) killJobs() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k, p := range s.jobs {
		select {
		case <-p.Done():
		default:
			if n := s.nodes[s.jn[k]]; n.Init() != 0 {
				_, _ = n.Systemctl(ctx, "kill", "--signal=SIGKILL", p.Unit())
			}
		}
	}
}

// exit waits for p and returns its exit status and stderr.
func (s *scenario) exit(p *systemdtest.Proc) (int, string) {
	s.t.Helper()
	res, err := p.Wait(s.ctx)
	var ee *systemdtest.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.t.Fatalf("%s: %v", p.Unit(), err)
	}
	return res.ExitCode, strings.TrimSpace(string(res.Stderr))
}

// wantExit fails the test unless p exits with one of codes.
// jobsAcross starts n jobs (job) round-robin on the nodes, each holding a random time in
// [lo, lo+span), with flags.
func (s *scenario) jobsAcross(n int, flags []string, lo, span time.Duration) {
	for i := range n {
		s.job(i%clusterSize, flags, "-hold", (lo + rand.N(span)).String())
	}
}

// wantAllDone waits for every job of the scenario and wants each to exit 0.
func (s *scenario) wantAllDone() {
	s.t.Helper()
	for k, p := range s.jobs {
		s.wantExit(p, fmt.Sprintf("job %d", k), 0)
	}
}

func (s *scenario) wantExit(p *systemdtest.Proc, what string, codes ...int) int {
	s.t.Helper()
	code, stderr := s.exit(p)
	for _, c := range codes {
		if code == c {
			return code
		}
	}
	s.t.Errorf("%s: conch exited %d, want %v; stderr: %s", what, code, codes, stderr)
	return code
}

// children returns the scenario's child records so far.
func (s *scenario) children() []childRec { return s.rec.children(s.name) }

// waitChildren waits until n children of the scenario have started, and returns them.
func (s *scenario) waitChildren(n int) []childRec {
	s.t.Helper()
	var chs []childRec
	s.waitFor(fmt.Sprintf("%d children of %s to start", n, s.name), func() bool {
		chs = s.children()
		return len(chs) >= n
	})
	return chs
}

// waitFor polls cond until it holds; it fails the test when the scenario's time is up.
func (s *scenario) waitFor(what string, cond func() bool) {
	s.t.Helper()
	if err := systemdtest.WaitFor(s.ctx, what, func() (bool, error) { return cond(), nil }); err != nil {
		s.t.Fatal(err)
	}
}

// keys returns the semaphore's keys in etcd now.
func (s *scenario) keys() int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, schema.Prefix(s.name, s.max), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		s.t.Fatal(err)
	}
	return int(resp.Count)
}

// verify waits until no key of the semaphore is left in etcd (a crashed holder's key goes at
// its lease's expiry) and the host's watches saw every deletion, then checks the history
// (check), logs the report and fails the test on a violation. It returns the report.
func (s *scenario) verify(spec checkSpec) report {
	s.t.Helper()
	return s.verifyWith(spec, nil)
}

// verifyWith is verify with more children than histchild's records: extra, such as the
// reboots of a FleetLock scenario, each a span that holds a slot by a key of etcd's history.
func (s *scenario) verifyWith(spec checkSpec, extra []childRec) report {
	s.t.Helper()
	spec.Max = s.max
	if spec.Slop == 0 {
		spec.Slop = time.Second
	}
	prefix := schema.Prefix(s.name, s.max)
	s.waitFor("no key of "+s.name+" left, as etcd and the host's watch see it", func() bool {
		return s.keys() == 0 && !slices.ContainsFunc(replay(s.obs.history(prefix), s.max), func(k *keyLife) bool { return k.deleted == 1<<63-1 })
	})
	r := check(append(s.children(), extra...), s.obs.history(prefix), spec, monoNow())
	s.t.Logf("history of %s[max=%d]: %v", s.name, s.max, r)
	if r.failed() {
		s.t.Errorf("%s: the history breaks the promise (%d violations, listed above)", s.name, len(r.Violations))
		s.logWarnings()
	}
	return r
}

// logWarnings logs every line of the jobs' stderr that warns (conch's warnings, such as a
// guardian program replaced by conch itself, D7a), to tell a fault of the machine from ours.
func (s *scenario) logWarnings() {
	for k, p := range s.jobs {
		for _, l := range strings.Split(string(p.Stderr()), "\n") {
			if strings.Contains(l, "warning") || strings.Contains(l, "re-executed instead") {
				s.t.Logf("job %d on node %d: %s", k, s.jn[k], l)
			}
		}
	}
}

// heal undoes every fault: ports up, drop rules gone, nodes thawed and running, every member
// running, and waits for a healthy cluster.
func (c *cluster) heal() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i, n := range c.nodes {
		_ = c.nw.Heal(i)
		_ = c.nw.AllowOutgoing(i) // fails when there is no drop table: fine
		_ = c.nw.AllowBetween(i)  // likewise
		if n.Init() == 0 {
			if err := n.Reboot(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		_ = n.Thaw(ctx)
		res, _ := n.Systemctl(ctx, "is-active", systemdtest.EtcdUnit)
		if strings.TrimSpace(string(res.Stdout)) != "active" {
			errs = append(errs, c.etcd.StartMember(ctx, i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.etcd.WaitHealthy(ctx)
}
