package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Timers of the members (TESTING-INFRA.md): a cut leader is replaced in 1-2 s, and the minimum
// lease TTL is ceil(1.5 x 500 ms) = 1 s.
const (
	EtcdHeartbeatMs = 50
	EtcdElectionMs  = 500

	// EtcdUnit is the transient service each member runs as inside its node.
	EtcdUnit = "conch-etcd.service"
	// etcdDataDir is on the node's overlay, so it survives a power loss (Kill, Restart).
	etcdDataDir = "/var/lib/conch-etcd"
	clientPort  = 2379
	peerPort    = 2380
	// etcdReadyTimeout bounds the wait for members to serve; a healthy start takes ~1 s.
	etcdReadyTimeout = 90 * time.Second
)

// EtcdCluster is one etcd member inside each node of a Network (member i in node i), started
// from the etcd binary at bin (a path inside the nodes, e.g. BinMount+"/server" as built by
// BuildBinaries from go.etcd.io/etcd/server/v3). Members run without fsync (their disk is a
// test overlay; a power loss of a node kills processes, not the host's page cache).
type EtcdCluster struct {
	t     testing.TB
	nw    *Network
	nodes []*Node
	bin   string
	token string

	mu      sync.Mutex
	clients []*clientv3.Client // memberClient's, by member
	joined  map[int]bool       // members re-added after a wipe (WipeMember): they join an existing cluster
}

// StartEtcdCluster starts one member in each of nodes (node i on nw.Addr(i)) and returns once
// every member answers a Status from the test binary. It fails the test otherwise.
func StartEtcdCluster(t testing.TB, nw *Network, nodes []*Node, bin string) *EtcdCluster {
	t.Helper()
	c := &EtcdCluster{t: t, nw: nw, nodes: nodes, bin: bin, token: "conch-" + randomHex()}
	ctx, cancel := context.WithTimeout(context.Background(), etcdReadyTimeout)
	defer cancel()
	for i := range nodes {
		if err := c.StartMember(ctx, i); err != nil {
			t.Fatalf("systemdtest: %v", err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	return c
}

// Endpoint returns member i's client endpoint (10.88.0.<i+1>:2379).
func (c *EtcdCluster) Endpoint(i int) string { return fmt.Sprintf("%s:%d", c.nw.Addr(i), clientPort) }

// Endpoints returns every member's client endpoint, member first's own first, as conch on node
// first is configured.
func (c *EtcdCluster) Endpoints(first int) []string {
	eps := []string{c.Endpoint(first)}
	for i := range c.nodes {
		if i != first {
			eps = append(eps, c.Endpoint(i))
		}
	}
	return eps
}

func (c *EtcdCluster) memberName(i int) string { return fmt.Sprintf("m%d", i+1) }

func (c *EtcdCluster) peerURL(i int) string {
	return fmt.Sprintf("http://%s:%d", c.nw.Addr(i), peerPort)
}

// StartMember starts member i as EtcdUnit in node i (again after KillMember or a Restart of
// the node: its data directory is kept, so it rejoins with its old identity; a member re-added
// by WipeMember joins the existing cluster). It returns once systemd started the process, not
// once the member serves (WaitHealthy).
func (c *EtcdCluster) StartMember(ctx context.Context, i int) error {
	c.mu.Lock()
	state := "new"
	if c.joined[i] {
		state = "existing"
	}
	c.mu.Unlock()
	var initial []string
	for j := range c.nodes {
		initial = append(initial, c.memberName(j)+"="+c.peerURL(j))
	}
	client := fmt.Sprintf("http://%s", c.Endpoint(i))
	n := c.nodes[i]
	// A failed or killed earlier run of the unit would keep its name taken.
	_, _ = n.Systemctl(ctx, "reset-failed", EtcdUnit)
	_, err := n.Nsenter(ctx, "systemd-run", "--quiet", "--collect", "--unit="+EtcdUnit, "--",
		c.bin, "--name="+c.memberName(i), "--data-dir="+etcdDataDir,
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+c.peerURL(i), "--initial-advertise-peer-urls="+c.peerURL(i),
		"--initial-cluster="+strings.Join(initial, ","), "--initial-cluster-state="+state,
		"--initial-cluster-token="+c.token,
		fmt.Sprintf("--heartbeat-interval=%d", EtcdHeartbeatMs), fmt.Sprintf("--election-timeout=%d", EtcdElectionMs),
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return fmt.Errorf("cannot start etcd member %d in node %s: %w", i, n.Name(), err)
	}
	return nil
}

// KillMember SIGKILLs member i (its unit in node i) and waits until the unit is inactive.
func (c *EtcdCluster) KillMember(ctx context.Context, i int) error {
	n := c.nodes[i]
	if _, err := n.Systemctl(ctx, "kill", "--signal=SIGKILL", EtcdUnit); err != nil {
		return fmt.Errorf("cannot kill etcd member %d: %w", i, err)
	}
	return WaitFor(ctx, "etcd member "+c.memberName(i)+" to stop", func() (bool, error) {
		res, _ := n.Systemctl(ctx, "is-active", EtcdUnit)
		s := strings.TrimSpace(string(res.Stdout))
		return s != "active" && s != "deactivating", nil
	})
}

// StopMember sends SIGSTOP to member i (its unit in node i): its connections stay open and
// silent, as with a member stuck or swapped out. ContMember continues it.
func (c *EtcdCluster) StopMember(ctx context.Context, i int) error {
	return c.signalMember(ctx, i, "SIGSTOP")
}

// ContMember sends SIGCONT to member i, stopped by StopMember.
func (c *EtcdCluster) ContMember(ctx context.Context, i int) error {
	return c.signalMember(ctx, i, "SIGCONT")
}

func (c *EtcdCluster) signalMember(ctx context.Context, i int, sig string) error {
	if _, err := c.nodes[i].Systemctl(ctx, "kill", "--signal="+sig, EtcdUnit); err != nil {
		return fmt.Errorf("cannot send %s to etcd member %d: %w", sig, i, err)
	}
	return nil
}

// clientBackoff caps the test binary's reconnect back-off at a second (gRPC's default grows to
// 120 s): after a member was killed, powered off or cut, the observers' watches and the
// harness's requests find it again within a second of its return.
var clientBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// Client returns a client from the test binary to the members given (by index; all of them
// when none is given), dialled through Network.Dial, closed at test cleanup. It has gRPC
// keep-alive (10 s, gRPC's floor, plus 3 s) so a dead connection does not hang it forever, and
// reconnects within a second of a member's return (clientBackoff).
func (c *EtcdCluster) Client(members ...int) *clientv3.Client {
	c.t.Helper()
	if len(members) == 0 {
		for i := range c.nodes {
			members = append(members, i)
		}
	}
	var eps []string
	for _, i := range members {
		eps = append(eps, c.Endpoint(i))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return c.nw.Dial(ctx, "tcp", addr) }),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: clientBackoff, MinConnectTimeout: 2 * time.Second}),
		},
		Logger: zap.NewNop(),
	})
	if err != nil {
		c.t.Fatalf("systemdtest: etcd client for %v: %v", eps, err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader returns the index of the member that is leader, by the members that answer.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	ids := map[uint64]int{}
	var leaders []uint64
	var errs []error
	for i := range c.nodes {
		st, err := c.status(ctx, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids[st.Header.MemberId] = i
		leaders = append(leaders, st.Leader)
	}
	for _, l := range leaders {
		if i, ok := ids[l]; ok && l != 0 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no answering etcd member is leader: %w", errors.Join(errs...))
}

// status asks member i for its status with a short deadline.
func (c *EtcdCluster) status(ctx context.Context, i int) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.memberClient(i).Status(ctx, c.Endpoint(i))
}

// memberClient returns a client of member i alone, made on first use and kept.
func (c *EtcdCluster) memberClient(i int) *clientv3.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = make([]*clientv3.Client, len(c.nodes))
	}
	if c.clients[i] == nil {
		c.clients[i] = c.Client(i)
	}
	return c.clients[i]
}

// WaitHealthy waits until every member answers a Status, agrees on a leader, and a
// linearizable read through each member succeeds.
func (c *EtcdCluster) WaitHealthy(ctx context.Context) error {
	return WaitFor(ctx, "every etcd member to serve", func() (bool, error) {
		for i := range c.nodes {
			st, err := c.status(ctx, i)
			if err != nil || st.Leader == 0 {
				return false, nil
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = c.memberClient(i).Get(rctx, "health")
			cancel()
			if err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}
