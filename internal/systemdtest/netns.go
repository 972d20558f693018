package systemdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Subnet is the private /24 of every Network. It exists only inside the network namespaces a
// Network creates (no host interface has it, there is no default route and the host's
// forwarding is never touched), so runs of several test binaries cannot collide on it.
const Subnet = "10.88.0.0/24"

// ObserverAddr is the address of the bridge itself, in the bridge's namespace: Network.Dial
// connects from there, which is how the test binary (on the host) reaches the nodes.
const ObserverAddr = "10.88.0.254"

const (
	netDirPrefix = "conch-net-" // /var/tmp/conch-net-<id>: owner and namespace list, for cleanup.sh
	nsPrefix     = "conch-"     // every namespace name starts with it (ip netns list | grep conch-)
	netTimeout   = 30 * time.Second
)

// Network is a private bridge in a network namespace of its own with one veth port per node;
// the node end of each port (eth0, address Addr(i)) lives in the node's own namespace. No link
// of a Network is ever in the host's namespace. Methods may be called from any goroutine.
type Network struct {
	t      testing.TB
	id     string
	dir    string
	bridge string   // name of the bridge's namespace
	nodes  []string // names of the nodes' namespaces
}

// NewNetwork creates the bridge namespace and n node namespaces (per-run names
// conch-br-<id>, conch-n<i>-<id>) and registers their removal with t.Cleanup (also when the
// test fails; tests/vm/cleanup.sh removes what a killed test binary left, by the owner file in
// /var/tmp/conch-net-<id>). Node i (0-based) gets address 10.88.0.<i+1>. It fails the test
// when a namespace or link cannot be created. Setup of 3 nodes takes ~100 ms.
func NewNetwork(t testing.TB, n int) *Network {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("systemdtest: ip (iproute2) not found: %v", err)
	}
	nw := &Network{t: t, id: randomHex()}
	dir, err := os.MkdirTemp(nodeDirParent, netDirPrefix+nw.id+"-")
	if err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	nw.dir = dir
	nw.bridge = nsPrefix + "br-" + nw.id
	for i := range n {
		nw.nodes = append(nw.nodes, fmt.Sprintf("%sn%d-%s", nsPrefix, i+1, nw.id))
	}
	// The list is written before anything exists, so a killed binary leaves nothing unlisted.
	all := append([]string{nw.bridge}, nw.nodes...)
	err = writeOwner(dir, nw.id)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "netns"), []byte(strings.Join(all, "\n")+"\n"), 0o644)
	}
	if err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	t.Cleanup(nw.cleanup)
	if err := nw.setup(); err != nil {
		t.Fatalf("systemdtest: cannot set up the test network: %v", err)
	}
	return nw
}

func (nw *Network) setup() error {
	br := nw.bridge
	cmds := [][]string{
		{"netns", "add", br},
		{"-n", br, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "br0", "type", "bridge"},
		{"-n", br, "addr", "add", ObserverAddr + "/24", "dev", "br0"},
		{"-n", br, "link", "set", "br0", "up"},
	}
	for i, ns := range nw.nodes {
		port := fmt.Sprintf("p%d", i+1)
		cmds = append(cmds,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", br, "link", "set", port, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", nw.Addr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, c := range cmds {
		if err := nw.ip(c...); err != nil {
			return err
		}
	}
	return nil
}

// ip runs ip(8) with args.
func (nw *Network) ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), netTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NSPath returns the path of node i's network namespace, for Options.NetNS.
func (nw *Network) NSPath(i int) string { return "/run/netns/" + nw.nodes[i] }

// NSName returns the name of node i's network namespace (ip netns exec NAME ...).
func (nw *Network) NSName(i int) string { return nw.nodes[i] }

// BridgeNS returns the name of the bridge's namespace.
func (nw *Network) BridgeNS() string { return nw.bridge }

// Addr returns node i's address (10.88.0.<i+1>).
func (nw *Network) Addr(i int) string { return fmt.Sprintf("10.88.0.%d", i+1) }

// Cut takes node i's bridge port down: every packet to or from the node is lost, and no peer
// sees a RST or FIN, so established connections stay ESTABLISHED (a black hole). Heal undoes it.
func (nw *Network) Cut(i int) error {
	return nw.ip("-n", nw.bridge, "link", "set", fmt.Sprintf("p%d", i+1), "down")
}

// Heal brings node i's bridge port up again.
func (nw *Network) Heal(i int) error {
	return nw.ip("-n", nw.bridge, "link", "set", fmt.Sprintf("p%d", i+1), "up")
}

// dropTable is the nftables table DropOutgoing installs in a node's namespace.
const dropTable = "conch_fault"

// DropOutgoing makes a one-way partition: an nftables table in node i's namespace drops every
// packet the node sends out of eth0, while what others send still arrives (and traffic inside
// the node, on lo, still flows). AllowOutgoing removes it. Needs nft (apt package nftables).
func (nw *Network) DropOutgoing(i int) error {
	rules := fmt.Sprintf("table inet %s {\n chain out {\n  type filter hook output priority 0; policy accept;\n  oifname \"eth0\" drop\n }\n}\n", dropTable)
	cmd := exec.Command("ip", "netns", "exec", nw.nodes[i], "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", nw.nodes[i], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// AllowOutgoing removes DropOutgoing's table from node i's namespace.
func (nw *Network) AllowOutgoing(i int) error {
	return nw.ip("netns", "exec", nw.nodes[i], "nft", "delete", "table", "inet", dropTable)
}

// pairTable is the nftables table DropBetween installs in a node's namespace (apart from
// dropTable, so a one-way partition and a pair partition of one node can coexist).
const pairTable = "conch_fault_pair"

// DropBetween partitions nodes i and j from each other only: an nftables table in node i's
// namespace drops every packet it sends to j's address and every packet it receives from it,
// both ways, while both still reach every other node (and the bridge, so the test binary still
// reaches both). With an etcd member in each, the two members lose each other but not the
// third. AllowBetween removes it. Needs nft (apt package nftables). It fails when node i has
// such a table already.
func (nw *Network) DropBetween(i, j int) error {
	rules := fmt.Sprintf("table inet %s {\n chain out {\n  type filter hook output priority 0; policy accept;\n  ip daddr %s drop\n }\n"+
		" chain in {\n  type filter hook input priority 0; policy accept;\n  ip saddr %s drop\n }\n}\n", pairTable, nw.Addr(j), nw.Addr(j))
	cmd := exec.Command("ip", "netns", "exec", nw.nodes[i], "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", nw.nodes[i], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// AllowBetween removes DropBetween's table from node i's namespace; it fails when there is none.
func (nw *Network) AllowBetween(i int) error {
	return nw.ip("netns", "exec", nw.nodes[i], "nft", "delete", "table", "inet", pairTable)
}

// Dial connects to addr (host:port on the Subnet) from the bridge's namespace, for clients in
// the test binary (grpc.WithContextDialer, http.Transport.DialContext). The socket is created
// on an OS thread that enters the namespace and leaves it again; a thread that cannot leave is
// not returned to the Go scheduler (it ends with its goroutine).
func (nw *Network) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		c, back, err := dialIn(ctx, "/run/netns/"+nw.bridge, network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialIn dials from inside the namespace at path on the calling (locked) thread; back reports
// whether the thread is in its original namespace again.
func dialIn(ctx context.Context, path, network, addr string) (c net.Conn, back bool, err error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("cannot enter network namespace %s: %w", path, err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, network, addr)
	return c, unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil, err
}

// cleanup deletes the namespaces (which deletes their links) and the owner directory.
func (nw *Network) cleanup() {
	var failed []string
	for _, ns := range append(append([]string{}, nw.nodes...), nw.bridge) {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if err := nw.ip("netns", "del", ns); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		nw.t.Errorf("systemdtest: cleanup of the test network: %s", strings.Join(failed, "; "))
		return
	}
	_ = os.RemoveAll(nw.dir)
}
