package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Freeze stalls every process of the node (systemd, its services, conch and the children) with
// cgroup v2's cgroup.freeze on the node's cgroup, and returns once the kernel reports the
// cgroup frozen or ctx ends. The node's network stack keeps running: peers' TCP connections to
// it stay up and are even acknowledged, but nothing answers. Thaw undoes it. Like a VM paused
// by its hypervisor, or a process stuck in a long GC pause or swap storm.
func (n *Node) Freeze(ctx context.Context) error { return n.setFrozen(ctx, true) }

// Thaw lets a frozen node run again and returns once the kernel reports it thawed.
func (n *Node) Thaw(ctx context.Context) error { return n.setFrozen(ctx, false) }

func (n *Node) setFrozen(ctx context.Context, frozen bool) error {
	n.mu.Lock()
	b := n.boot
	n.mu.Unlock()
	if b == nil || b.cgroups == nil {
		return fmt.Errorf("node %s is not running", n.name)
	}
	v, want := "0", "frozen 0"
	if frozen {
		v, want = "1", "frozen 1"
	}
	dir := b.cgroups.unified
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0); err != nil {
		return fmt.Errorf("cannot write cgroup.freeze of node %s: %w", n.name, err)
	}
	return WaitFor(ctx, "cgroup.events of node "+n.name+" to say "+want, func() (bool, error) {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		return strings.Contains(string(data), want), nil
	})
}

// errNotRunning is returned by methods that need a booted node.
var errNotRunning = errors.New("node is not running")

// PIDNamespace returns the node's PID namespace as readlink(/proc/INIT/ns/pid) shows it
// ("pid:[4026532...]"), to tell the node's processes apart in the host's /proc.
func (n *Node) PIDNamespace() (string, error) {
	init := n.Init()
	if init == 0 {
		return "", fmt.Errorf("node %s: %w", n.name, errNotRunning)
	}
	return os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
}
