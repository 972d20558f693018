package systemdtest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-project/conch/internal/ci"
)

// listenIn listens on addr inside the network namespace at path (from a locked thread that
// enters and leaves it) and accepts in the background until the test ends.
func listenIn(t *testing.T, path, addr string) {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, err}
			return
		}
		l, err := net.Listen("tcp", addr)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = r.l.Close() })
	go func() {
		for {
			c, err := r.l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
}

// dialOK reports whether a TCP connection to addr from the bridge's namespace succeeds within
// timeout.
func dialOK(nw *Network, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := nw.Dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// The network's faults do what they say, without booting a node: a listener in node 0's
// namespace is reachable from the bridge, not while its port is cut or while the node drops
// what it sends, and reachable again after Heal and AllowOutgoing. The test binary's own
// namespace never sees the subnet.
func TestNetworkFaults(t *testing.T) {
	if os.Geteuid() != 0 {
		ci.Unavailable(t, "systemdtest: network namespaces need root")
	}
	nw := NewNetwork(t, 2)
	addr := nw.Addr(0) + ":2379"
	listenIn(t, nw.NSPath(0), addr)
	const quick, dead = 5 * time.Second, 300 * time.Millisecond
	if !dialOK(nw, addr, quick) {
		t.Fatal("node 0 unreachable from the bridge on a healthy network")
	}
	_, subnet, _ := net.ParseCIDR(Subnet)
	hostAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range hostAddrs {
		if ip, ok := a.(*net.IPNet); ok && subnet.Contains(ip.IP) {
			t.Errorf("the host's own namespace has %v, in the test subnet %s", ip, Subnet)
		}
	}
	if err := nw.Cut(0); err != nil {
		t.Fatal(err)
	}
	if dialOK(nw, addr, dead) {
		t.Error("node 0 reachable while its bridge port is down")
	}
	if err := nw.Heal(0); err != nil {
		t.Fatal(err)
	}
	if !dialOK(nw, addr, quick) {
		t.Error("node 0 unreachable after Heal")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		ci.Unavailable(t, "systemdtest: nft not found (apt package nftables; scripts/test-deps.sh installs it)")
	}
	if err := nw.DropOutgoing(0); err != nil {
		t.Fatal(err)
	}
	if dialOK(nw, addr, dead) {
		t.Error("node 0 answered while it drops what it sends")
	}
	if err := nw.AllowOutgoing(0); err != nil {
		t.Fatal(err)
	}
	if !dialOK(nw, addr, quick) {
		t.Error("node 0 unreachable after AllowOutgoing")
	}
}

// dialFrom reports whether a TCP connection to addr from node i's namespace succeeds within
// timeout.
func dialFrom(nw *Network, i int, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ok := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked when the thread cannot leave the namespace
		c, back, err := dialIn(ctx, nw.NSPath(i), "tcp", addr)
		if back {
			runtime.UnlockOSThread()
		}
		if err == nil {
			_ = c.Close()
		}
		ok <- err == nil
	}()
	return <-ok
}

// A pair partition cuts two nodes from each other only: node 1 cannot reach node 0 while
// node 0 drops its traffic with node 1, the bridge (and so any third node) still can, and
// AllowBetween undoes it.
func TestNetworkDropBetween(t *testing.T) {
	if os.Geteuid() != 0 {
		ci.Unavailable(t, "systemdtest: network namespaces need root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		ci.Unavailable(t, "systemdtest: nft not found (apt package nftables; scripts/test-deps.sh installs it)")
	}
	nw := NewNetwork(t, 2)
	addr := nw.Addr(0) + ":2379"
	listenIn(t, nw.NSPath(0), addr)
	const quick, dead = 5 * time.Second, 300 * time.Millisecond
	if !dialFrom(nw, 1, addr, quick) {
		t.Fatal("node 0 unreachable from node 1 on a healthy network")
	}
	if err := nw.DropBetween(0, 1); err != nil {
		t.Fatal(err)
	}
	if dialFrom(nw, 1, addr, dead) {
		t.Error("node 1 reached node 0 across the pair partition")
	}
	if !dialOK(nw, addr, quick) {
		t.Error("the bridge lost node 0 in a partition between nodes 0 and 1 only")
	}
	if err := nw.AllowBetween(0); err != nil {
		t.Fatal(err)
	}
	if !dialFrom(nw, 1, addr, quick) {
		t.Error("node 0 unreachable from node 1 after AllowBetween")
	}
}
