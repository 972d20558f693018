package systemdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"golang.org/x/sys/unix"

	"github.com/conch-project/conch/internal/syncbuf"
)

// Defaults for Options.
const (
	// DefaultBootTimeout bounds Boot from the start of systemd-nspawn until
	// `systemctl is-system-running --wait` answers. A boot takes 0.3-0.5 s on an idle 2-core
	// machine; the margin is for machines shared by several test binaries.
	DefaultBootTimeout = 60 * time.Second

	// teardownTimeout bounds the cleanup of one node (kill, unmount, rmdir).
	teardownTimeout = 30 * time.Second

	// nodeDirParent holds each node's overlay directories. /var/tmp, not t.TempDir: a killed
	// test binary leaves mounts there that tests/vm/cleanup.sh must find by name.
	nodeDirParent = "/var/tmp"
	nodeDirPrefix = "conch-node-"

	// BinMount is where Options.BinDir appears inside a node.
	BinMount = "/opt/bin"
)

// Options say how to boot a node. The zero value boots a node on the host's network with
// nothing bind-mounted.
type Options struct {
	// Name prefixes the machine name (and so the node's host name); a random suffix makes it
	// unique per run. Default: derived from the test's name.
	Name string
	// BinDir is a host directory bind-mounted read-only at /opt/bin (BinMount), e.g. the
	// directory holding a freshly built conch binary. "" mounts nothing.
	BinDir string
	// Binds are further host directories or files to bind-mount into the node.
	Binds []Bind
	// NetNS is the path of a network namespace for the node (e.g. /run/netns/n1). "" shares
	// the host's network namespace, so a server on the host's 127.0.0.1 is reachable.
	NetNS string
	// BootTimeout bounds the boot; 0 means DefaultBootTimeout.
	BootTimeout time.Duration
}

// Bind is one bind mount of a host path into a node.
type Bind struct {
	Host     string // absolute path on the host
	Node     string // absolute path inside the node; "" means the same as Host
	Writable bool   // false mounts it read-only
}

// Node is one booted container with systemd as PID 1. Its methods may be called from any
// goroutine; Boot, Restart and Kill only from the test goroutine.
type Node struct {
	t      testing.TB
	name   string
	base   string // read-only lower layer
	dir    string // upper, work and merged live here
	merged string
	opts   Options

	mu       sync.Mutex
	boot     *bootState // nil while powered off
	runCount int
}

// bootState is what one boot of a node owns: the nspawn process, its cgroups and the init PID.
type bootState struct {
	cmd     *exec.Cmd
	cgroups *nodeCgroups
	init    int
	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error         // valid after exited is closed
	log     *syncbuf.Buffer
}

// Boot boots a node from the shared root filesystem (EnsureRootfs) with a fresh, empty overlay
// of its own, and returns once its systemd reports the system running or degraded. Cleanup
// (registered with t.Cleanup, run also when the test fails) kills every process of the node,
// unmounts the overlay, removes the cgroups and the node's directory; on a failed test it first
// logs the tail of the node's journal. Boot fails the test (or skips it, see EnsureRootfs and
// BootAll) when the node cannot be booted. It must be called from the test goroutine.
func Boot(t testing.TB, opts Options) *Node {
	t.Helper()
	return BootAll(t, opts)[0]
}

// BootAll boots one node per Options, all at once (each boot is mostly waiting for its
// systemd), and returns them in the same order once all are running; otherwise it is Boot.
// Under -short (testing.Short) it skips the test: booting nodes is not in the fast tier.
func BootAll(t testing.TB, opts ...Options) []*Node {
	t.Helper()
	if testing.Short() {
		t.Skip("boots systemd nodes: not in the -short tier")
	}
	base := EnsureRootfs(t)
	checkPrerequisites(t)
	nodes := make([]*Node, len(opts))
	for i, o := range opts {
		nodes[i] = newNode(t, base, o)
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("systemdtest: cannot boot node %s: %v", nodes[i].name, err)
		}
	}
	return nodes
}

// newNode creates a node's directory (overlay layers, owner file) and registers its cleanup.
func newNode(t testing.TB, base string, opts Options) *Node {
	t.Helper()
	if opts.BootTimeout <= 0 {
		opts.BootTimeout = DefaultBootTimeout
	}
	n := &Node{t: t, base: base, opts: opts, name: machineName(opts.Name, t.Name())}
	dir, err := os.MkdirTemp(nodeDirParent, nodeDirPrefix+n.name+"-")
	if err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	n.dir = dir
	n.merged = filepath.Join(dir, "merged")
	t.Cleanup(n.cleanup)
	for _, sub := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatalf("systemdtest: %v", err)
		}
	}
	if err := writeOwner(dir, n.name); err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	return n
}

// writeOwner records in dir which node it holds and which process owns it ("PID STARTTIME",
// the start time in clock ticks from /proc/PID/stat), so that tests/vm/cleanup.sh removes
// only nodes whose test binary is gone.
func writeOwner(dir, name string) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(after) // f[0] is field 3 (state); start time is field 22
	if len(f) < 20 {
		return fmt.Errorf("cannot parse /proc/self/stat: %q", stat)
	}
	owner := fmt.Sprintf("%d %s\n", os.Getpid(), f[19])
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "machine"), []byte(name+"\n"), 0o644)
}

// checkPrerequisites skips or fails the test when a tool Boot needs is missing.
func checkPrerequisites(t testing.TB) {
	t.Helper()
	for _, cmd := range []string{"systemd-nspawn", "nsenter"} {
		if _, err := exec.LookPath(cmd); err != nil {
			ci.Unavailable(t, "systemdtest: %s not found; install it with: sudo bash %s", cmd, ScriptPath())
		}
	}
	fss, _ := os.ReadFile("/proc/filesystems")
	if !bytes.Contains(fss, []byte("\toverlay\n")) {
		ci.Unavailable(t, "systemdtest: the kernel has no overlayfs (modprobe overlay)")
	}
	if _, _, err := cgroupRoots(); err != nil {
		ci.Unavailable(t, "systemdtest: %v", err)
	}
}

var nameJunk = regexp.MustCompile(`[^a-z0-9]+`)

// machineName builds a unique machine name (a valid host name, at most 40 characters) from
// prefix, or from the test's name when prefix is empty.
func machineName(prefix, testName string) string {
	if prefix == "" {
		prefix = testName
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 && i < len(prefix)-1 {
			prefix = prefix[i+1:]
		}
	}
	prefix = strings.Trim(nameJunk.ReplaceAllString(strings.ToLower(prefix), "-"), "-")
	if len(prefix) > 30 {
		prefix = strings.TrimRight(prefix[:30], "-")
	}
	if prefix == "" {
		prefix = "node"
	}
	return prefix + "-" + randomHex()
}

// randomHex returns 8 random hexadecimal digits.
func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start mounts the overlay, starts systemd-nspawn in fresh cgroups and waits for the boot.
func (n *Node) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.BootTimeout)
	defer cancel()
	began := time.Now()
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", n.base, filepath.Join(n.dir, "upper"), filepath.Join(n.dir, "work"))
	if err := unix.Mount("overlay", n.merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("cannot mount overlay on %s: %w", n.merged, err)
	}
	cg, err := newNodeCgroups(n.name)
	if err != nil {
		return err
	}
	b := &bootState{cgroups: cg, exited: make(chan struct{}), log: &syncbuf.Buffer{}}
	n.mu.Lock()
	n.boot = b
	n.mu.Unlock()

	// The shell moves itself into the node's cgroups and then becomes systemd-nspawn, so
	// nspawn never runs a single instruction in the test binary's cgroup.
	args := []string{"-c", `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`, "sh"}
	args = append(args, cg.procsFiles()...)
	args = append(args, "--")
	args = append(args, n.nspawnArgs()...)
	b.cmd = exec.Command("/bin/sh", args...)
	b.cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1")
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	// Its own process group: a ^C meant for `go test` must not reach the container first.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("cannot start systemd-nspawn: %w", err)
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()

	init, err := n.waitInit(ctx, b)
	if err != nil {
		return err
	}
	n.mu.Lock()
	b.init = init
	n.mu.Unlock()
	if err := n.waitRunning(ctx, b); err != nil {
		return err
	}
	n.t.Logf("systemdtest: node %s booted in %v (init PID %d)", n.name, time.Since(began).Round(time.Millisecond), init)
	return nil
}

func (n *Node) nspawnArgs() []string {
	args := []string{"systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit",
		"--link-journal=no", "--resolv-conf=off", "--timezone=off", "--console=pipe",
		"--directory=" + n.merged, "--machine=" + n.name}
	if n.opts.BinDir != "" {
		args = append(args, "--bind-ro="+n.opts.BinDir+":"+BinMount)
	}
	for _, b := range n.opts.Binds {
		to := b.Node
		if to == "" {
			to = b.Host
		}
		flag := "--bind-ro="
		if b.Writable {
			flag = "--bind="
		}
		args = append(args, flag+b.Host+":"+to)
	}
	if n.opts.NetNS != "" {
		args = append(args, "--network-namespace-path="+n.opts.NetNS)
	}
	return args
}

// waitInit finds the container's PID 1 among the descendants of systemd-nspawn. Right after
// launch nspawn's child is still in the host's namespaces (nsenter would then run commands on
// the host): only a process in another PID namespace whose comm is systemd qualifies.
func (n *Node) waitInit(ctx context.Context, b *bootState) (int, error) {
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0, err
	}
	var init int
	err = n.poll(ctx, b, "the container's init", func() bool {
		init = findInit(b.cmd.Process.Pid, self)
		return init != 0
	})
	return init, err
}

// findInit returns the PID of a descendant of root that is PID 1 of a PID namespace other than
// self and already runs systemd, or 0.
func findInit(root int, self string) int {
	for _, pid := range descendants(root) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil || ns == self {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "systemd" && nsPID(pid) == 1 {
			return pid
		}
	}
	return 0
}

// descendants lists the PIDs below root in the process tree (children first).
func descendants(root int) []int {
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// nsPID returns the PID of pid in its innermost PID namespace (last NSpid field), or 0.
func nsPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
			v, _ := strconv.Atoi(f[len(f)-1])
			return v
		}
	}
	return 0
}

// waitRunning waits for `systemctl is-system-running --wait` to say running or degraded. It is
// retried: in the first milliseconds systemd's private socket may not exist yet.
func (n *Node) waitRunning(ctx context.Context, b *bootState) error {
	var last string
	err := n.poll(ctx, b, "systemctl is-system-running", func() bool {
		res, _ := n.Nsenter(ctx, "systemctl", "is-system-running", "--wait")
		state := strings.TrimSpace(string(res.Stdout))
		last = state + " " + strings.TrimSpace(string(res.Stderr))
		return state == "running" || state == "degraded"
	})
	if err != nil {
		return fmt.Errorf("%w (last answer: %q)", err, last)
	}
	return nil
}

// poll calls cond every 20 ms until it is true, ctx ends or systemd-nspawn exits.
func (n *Node) poll(ctx context.Context, b *bootState, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; nspawn said: %s", what, ctx.Err(), tail(b.log.Bytes(), 2048))
		case <-b.exited:
			return fmt.Errorf("systemd-nspawn exited (%v) while waiting for %s: %s", b.waitErr, what, tail(b.log.Bytes(), 2048))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Name returns the node's machine name, which is also its host name.
func (n *Node) Name() string { return n.name }

// Init returns the host PID of the node's systemd (PID 1 inside), or 0 while it is powered off.
func (n *Node) Init() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.boot == nil {
		return 0
	}
	return n.boot.init
}

// BusAddress returns the D-Bus address of the node's system bus as seen from the host
// (unix:path=/proc/INIT/root/run/dbus/system_bus_socket), for assertions on units from the
// test. A scope can only take PIDs of the node's own PID namespace: code that creates scopes
// must run inside the node (Run, Start).
func (n *Node) BusAddress() string {
	return fmt.Sprintf("unix:path=/proc/%d/root/run/dbus/system_bus_socket", n.Init())
}

// Kill powers the node off the hard way (SIGKILL to every process of the node, like pulling
// the plug) and unmounts its overlay, keeping the disk (the overlay's upper layer) for Restart.
// It fails the test when the node cannot be stopped.
func (n *Node) Kill() {
	n.t.Helper()
	if err := n.stop(); err != nil {
		n.t.Fatalf("systemdtest: %v", err)
	}
}

// Restart boots a node that Kill powered off again, on the same disk. It fails the test when
// the node does not boot within Options.BootTimeout.
func (n *Node) Restart() {
	n.t.Helper()
	if err := n.Reboot(); err != nil {
		n.t.Fatalf("systemdtest: %v", err)
	}
}

// Reboot is Restart returning its error instead of failing the test, for subtests of the test
// that booted the node (which must not fail their parent from their own goroutine).
func (n *Node) Reboot() error {
	n.mu.Lock()
	running := n.boot != nil
	n.mu.Unlock()
	if running {
		if err := n.stop(); err != nil {
			return err
		}
	}
	if err := n.start(); err != nil {
		return fmt.Errorf("cannot boot node %s again: %w", n.name, err)
	}
	return nil
}

// PowerOff is Kill returning its error instead of failing the test (see Reboot).
func (n *Node) PowerOff() error { return n.stop() }

// stop kills the node's processes, waits for nspawn, removes its cgroups and unmounts the
// overlay. It does nothing when the node is not running.
func (n *Node) stop() error {
	n.mu.Lock()
	b := n.boot
	n.boot = nil
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	var errs []error
	if b != nil {
		if b.cgroups != nil {
			errs = append(errs, b.cgroups.kill(ctx))
		}
		if b.cmd != nil && b.cmd.Process != nil {
			_ = b.cmd.Process.Kill()
			select {
			case <-b.exited:
			case <-ctx.Done():
				errs = append(errs, fmt.Errorf("systemd-nspawn (PID %d) of node %s did not exit", b.cmd.Process.Pid, n.name))
			}
		}
		if b.cgroups != nil {
			errs = append(errs, b.cgroups.remove(ctx))
		}
		// nspawn removes this itself on a clean exit only.
		_ = os.RemoveAll(filepath.Join("/run/systemd/nspawn/propagate", n.name))
	}
	if err := unmount(n.merged); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unmount unmounts the overlay at dir if it is mounted, lazily if it is busy.
func unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil // EINVAL: not a mount point (already unmounted or never mounted)
	case errors.Is(err, unix.EBUSY):
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("cannot unmount %s: %w", dir, err)
		}
		return nil
	default:
		return fmt.Errorf("cannot unmount %s: %w", dir, err)
	}
}

// cleanup is registered by Boot: on a failed test it logs the node's journal, then stops the
// node and removes its directory.
func (n *Node) cleanup() {
	if n.t.Failed() && n.Init() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, _ := n.Nsenter(ctx, "journalctl", "--no-pager", "-q", "-b", "-n", "60")
		cancel()
		n.t.Logf("systemdtest: last journal lines of node %s:\n%s", n.name, res.Stdout)
	}
	err := n.stop()
	if err == nil {
		err = os.RemoveAll(n.dir)
	}
	if err != nil {
		n.t.Errorf("systemdtest: cleanup of node %s: %v", n.name, err)
	}
}
