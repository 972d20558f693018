package systemdtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testTimeout bounds each smoke test's commands; a healthy run needs a few seconds.
const testTimeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestBootRunsSystemdAndTransientServices(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	t.Parallel()
	bins := BuildBinaries(t, "./internal/systemdtest/testdata/nodeinfo")
	n := Boot(t, Options{BinDir: bins})
	ctx := testContext(t)

	res, err := n.Systemctl(ctx, "is-system-running")
	if state := strings.TrimSpace(string(res.Stdout)); state != "running" && state != "degraded" {
		t.Fatalf("is-system-running = %q (%v), want running or degraded", state, err)
	}

	// A binary from /opt/bin runs as a transient service: PID 1 is systemd and the process
	// sits in the service's cgroup of the node, not in the host's.
	res, err = n.Run(ctx, BinMount+"/nodeinfo")
	if err != nil {
		t.Fatalf("Run nodeinfo: %v", err)
	}
	info := KeyValues(string(res.Stdout))
	if info["pid1"] != "systemd" {
		t.Errorf("PID 1 inside the node is %q, want systemd", info["pid1"])
	}
	if !strings.HasPrefix(info["cgroup"], "/system.slice/conch-run-") || !strings.HasSuffix(info["cgroup"], ".service") {
		t.Errorf("transient service runs in cgroup %q, want /system.slice/conch-run-*.service", info["cgroup"])
	}

	// Exit status, stderr and a literal $ come back unchanged.
	res, err = n.Run(ctx, "/bin/sh", "-c", `echo "$0" >&2; exit 3`, "$HOME")
	var exit *ExitError
	if !errors.As(err, &exit) || res.ExitCode != 3 {
		t.Errorf("Run(exit 3) = %v, exit code %d; want *ExitError with 3", err, res.ExitCode)
	}
	if got := strings.TrimSpace(string(res.Stderr)); got != "$HOME" {
		t.Errorf("stderr = %q, want the literal $HOME", got)
	}

	// Nsenter runs outside any unit.
	res, err = n.Nsenter(ctx, BinMount+"/nodeinfo")
	if err != nil {
		t.Fatalf("Nsenter nodeinfo: %v", err)
	}
	if info := KeyValues(string(res.Stdout)); info["pid1"] != "systemd" {
		t.Errorf("PID 1 seen through nsenter is %q, want systemd", info["pid1"])
	}

	// A unit file written from the test is loaded and started by the node's systemd.
	unit := "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c 'echo ok > /var/tmp/unit-ran'\n"
	if err := n.WriteFile(ctx, "/etc/systemd/system/smoke.service", []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Systemctl(ctx, "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Systemctl(ctx, "start", "smoke.service"); err != nil {
		t.Fatal(err)
	}
	if got, err := n.ReadFile(ctx, "/var/tmp/unit-ran"); err != nil || string(got) != "ok\n" {
		t.Errorf("smoke.service wrote %q (%v), want ok", got, err)
	}

	// The node's bus answers from the host.
	conn, err := n.DialBus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	props, err := conn.GetUnitPropertiesContext(ctx, "smoke.service")
	if err != nil {
		t.Fatal(err)
	}
	if props["ActiveState"] != "active" {
		t.Errorf("smoke.service ActiveState over the bus = %v, want active", props["ActiveState"])
	}
}

func TestStartAndStopBackgroundService(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	t.Parallel()
	n := Boot(t, Options{})
	ctx := testContext(t)

	p, err := n.Start(ctx, "/bin/sh", "-c", "echo started; exec sleep infinity")
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, "the service to print started", func() (bool, error) {
		return strings.Contains(string(p.Stdout()), "started"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := n.Systemctl(ctx, "is-active", p.Unit()); err != nil || strings.TrimSpace(string(res.Stdout)) != "active" {
		t.Fatalf("%s is not active: %v", p.Unit(), err)
	}
	if _, err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the command ended")
	}
	// --collect: nothing is left of the unit.
	res, _ := n.Systemctl(ctx, "show", "--property=LoadState", p.Unit())
	if got := strings.TrimSpace(string(res.Stdout)); got != "LoadState=not-found" {
		t.Errorf("after stop, %s has %s, want LoadState=not-found", p.Unit(), got)
	}
}

func TestTwoNodesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	t.Parallel()
	a := Boot(t, Options{Name: "a"})
	b := Boot(t, Options{Name: "b"})
	ctx := testContext(t)

	read := func(n *Node, path string) string {
		t.Helper()
		data, err := n.ReadFile(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	for _, n := range []*Node{a, b} {
		res, err := n.Nsenter(ctx, "hostname")
		if got := strings.TrimSpace(string(res.Stdout)); err != nil || got != n.Name() {
			t.Errorf("node %s has host name %q (%v), want its machine name", n.Name(), got, err)
		}
	}
	if ma, mb := read(a, "/etc/machine-id"), read(b, "/etc/machine-id"); ma == "" || ma == mb {
		t.Errorf("machine IDs %q and %q, want two different ones", ma, mb)
	}

	// Each node has its own systemd: a unit started in a is unknown to b.
	p, err := a.Start(ctx, "sleep", "infinity")
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, p.Unit()+" active in node a", func() (bool, error) {
		res, _ := a.Systemctl(ctx, "is-active", p.Unit())
		return strings.TrimSpace(string(res.Stdout)) == "active", nil
	}); err != nil {
		t.Fatal(err)
	}
	res, _ := b.Systemctl(ctx, "show", "--property=LoadState", p.Unit())
	if got := strings.TrimSpace(string(res.Stdout)); got != "LoadState=not-found" {
		t.Errorf("node b sees node a's %s: %s", p.Unit(), got)
	}

	// Pulling a's plug leaves b running; a boots again with its disk intact.
	if err := a.WriteFile(ctx, "/var/tmp/marker", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldInit := a.Init()
	a.Kill()
	// The dead init may linger as a zombie until the host's PID 1 reaps it.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(oldInit) + "/stat")
	if _, after, _ := strings.Cut(string(stat), ") "); err == nil && !strings.HasPrefix(after, "Z") {
		t.Errorf("init PID %d of node a still runs after Kill: %s", oldInit, stat)
	}
	if res, err := b.Systemctl(ctx, "is-system-running"); err != nil && strings.TrimSpace(string(res.Stdout)) != "degraded" {
		t.Errorf("node b after node a's power loss: %q %v", res.Stdout, err)
	}
	a.Restart()
	if got := read(a, "/var/tmp/marker"); got != "kept" {
		t.Errorf("after Restart /var/tmp/marker = %q, want kept", got)
	}
}
