package scripts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/systemdtest"
)

// clusterTimeout bounds one cluster.sh command: up builds nothing (the test does), boots three
// nodes and waits for etcd's quorum (seconds on an idle machine).
const clusterTimeout = 5 * time.Minute

// cluster runs scripts/cluster.sh with args for the cluster called name and returns its
// output and exit status.
func cluster(t *testing.T, name string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(systemdtest.ModuleRoot(), "scripts", "cluster.sh")}, args...)...)
	cmd.Env = append(append(os.Environ(), "CONCH_CLUSTER="+name), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("cluster.sh %v: %v\n%s", args, err, out.String())
	return "", -1
}

// make cluster's script: three nodes come up with the fresh .deb and etcd, conch runs in a
// node (--who answers: 1, no holder; a job runs in a scope of the node), a node's power
// loss and reboot work, and `down` leaves no namespace, mount, cgroup or directory behind.
func TestClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("boots three systemd nodes: not in the -short tier")
	}
	for _, tool := range []string{"systemd-nspawn", "ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			ci.Unavailable(t, "%s not found: run scripts/test-deps.sh", tool)
		}
	}
	if os.Geteuid() != 0 {
		ci.Unavailable(t, "cluster.sh needs root")
	}
	dir := t.TempDir()
	deb, etcd := buildForCluster(t, dir)
	name := fmt.Sprintf("conch-ct-%d", os.Getpid()) // tests/vm/cleanup.sh removes it if this process dies
	env := []string{"CONCH_CLUSTER_DEB=" + deb, "CONCH_CLUSTER_ETCD=" + etcd}
	t.Cleanup(func() { cluster(t, name, nil, "down") })
	began := time.Now()
	if out, rc := cluster(t, name, env, "up"); rc != 0 {
		t.Fatalf("up: %d\n%s", rc, out)
	}
	t.Logf("cluster.sh up took %v", time.Since(began).Round(time.Millisecond))
	if out, rc := cluster(t, name, nil, "run", "n2", "conch", "sema", "--who"); rc != 1 || !strings.Contains(out, "no holders or waiters") {
		t.Errorf("conch sema --who in n2: %d\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "run", "n1", "conch", "sema", "try", "--max", "1", "-v", "--", "hostname"); rc != 0 || !strings.Contains(out, "n1\n") || !strings.Contains(out, "in conch-sema-try-") {
		t.Errorf("a job in n1: %d\n%s", rc, out)
	}
	checkNodeSetup(t, name)
	checkRollingReboot(t, name)
	if out, rc := cluster(t, name, nil, "powerloss", "n3"); rc != 0 {
		t.Fatalf("powerloss: %d\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "boot", "n3"); rc != 0 {
		t.Fatalf("boot: %d\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "run", "n3", "conch", "sema", "--who"); rc != 1 {
		t.Errorf("--who in n3 after its reboot: %d\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "down"); rc != 0 {
		t.Fatalf("down: %d\n%s", rc, out)
	}
	checkNothingLeft(t, name)
}

// checkNodeSetup checks what a node offers an operator: localhost in /etc/hosts, man conch,
// bash completion, every example unit installed and none enabled, and `run` passing its
// arguments on as given (systemd would expand $HOME and ${X} in a service's command line).
func checkNodeSetup(t *testing.T, name string) {
	t.Helper()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"getent", "hosts", "localhost"}, "localhost"},
		{[]string{"man", "-w", "conch"}, "/usr/share/man/man1/conch.1.gz"},
		{[]string{"test", "-r", "/usr/share/bash-completion/bash_completion", "-a", "-r", "/usr/share/bash-completion/completions/conch"}, ""},
		{[]string{"echo", "$HOME", "${X}", "a$$b"}, "$HOME ${X} a$$b\n"},
	} {
		if out, rc := cluster(t, name, nil, append([]string{"run", "n1"}, c.args...)...); rc != 0 || !strings.Contains(out, c.want) {
			t.Errorf("run n1 %q: %d %q, want %q", c.args, rc, out, c.want)
		}
	}
	for _, unit := range []string{"conch-worker.service", "conch-maintenance.timer", "conch-rolling-reboot.timer", "conch-rolling-reboot-release.service",
		"conch-ha-job.timer", "conch-metrics.timer", "conch-fleetlock.service", "conch-job@.service"} {
		out, _ := cluster(t, name, nil, "run", "n2", "systemctl", "is-enabled", unit)
		if want := "disabled\n"; unit == "conch-job@.service" && out != "static\n" || unit != "conch-job@.service" && out != want { // a template: static
			t.Errorf("systemctl is-enabled %s in n2: %q, want the unit installed and disabled", unit, out)
		}
	}
}

// checkRollingReboot runs docs/cluster.md's rolling reboot: n2 takes the slot and reboots,
// and stays down (a reboot ends a node's container) with its slot kept; `boot` brings it back,
// and its release unit frees the slot.
func checkRollingReboot(t *testing.T, name string) {
	t.Helper()
	for _, n := range []string{"n1", "n2", "n3"} {
		if out, rc := cluster(t, name, nil, "run", n, "systemctl", "enable", "conch-rolling-reboot-release.service"); rc != 0 {
			t.Fatalf("enable the release unit in %s: %d\n%s", n, rc, out)
		}
	}
	if out, rc := cluster(t, name, nil, "run", "n2", "touch", "/run/reboot-required"); rc != 0 { // the unit's condition
		t.Fatalf("touch /run/reboot-required in n2: %d\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "run", "n2", "systemctl", "start", "--no-block", "conch-rolling-reboot.service"); rc != 0 {
		t.Fatalf("start the rolling reboot in n2: %d\n%s", rc, out)
	}
	polltest.Until(t, time.Minute, "n2 down after its reboot", func() bool {
		out, _ := cluster(t, name, nil, "status")
		return strings.Contains(out, "n2 10.77.0.12 down")
	})
	if out, rc := cluster(t, name, nil, "run", "n1", "conch", "sema", "rolling-reboot", "--max", "1", "--nonblock", "--", "true"); rc != 75 {
		t.Errorf("a second reboot while n2 is down: %d, want 75 (the slot kept)\n%s", rc, out)
	}
	if out, rc := cluster(t, name, nil, "boot", "n2"); rc != 0 {
		t.Fatalf("boot n2 after its reboot: %d\n%s", rc, out)
	}
	polltest.Until(t, time.Minute, "the slot freed by n2's release unit", func() bool {
		_, rc := cluster(t, name, nil, "run", "n1", "conch", "sema", "rolling-reboot", "--who", "-q")
		return rc == 1
	})
}

// buildForCluster builds the .deb (scripts/package.sh) and etcd into dir.
func buildForCluster(t *testing.T, dir string) (deb, etcd string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	root := systemdtest.ModuleRoot()
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "package.sh"), filepath.Join(dir, "dist")).CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	deb = strings.Fields(string(out))[0]
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(l, ".deb") {
			deb = l
		}
	}
	etcd = filepath.Join(dir, "etcd")
	build := exec.CommandContext(ctx, "go", "build", "-o", etcd, "go.etcd.io/etcd/server/v3")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building etcd: %v\n%s", err, out)
	}
	return deb, etcd
}

// checkNothingLeft fails the test if anything of cluster name remains.
func checkNothingLeft(t *testing.T, name string) {
	t.Helper()
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), name) {
		t.Errorf("network namespaces left:\n%s", out)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), name) {
		t.Errorf("mounts of %s left", name)
	}
	for _, p := range []string{"/var/tmp/" + name, "/sys/fs/cgroup/unified/conch-cluster/" + name + "-n1", "/sys/fs/cgroup/conch-cluster/" + name + "-n1", "/sys/fs/cgroup/systemd/conch-cluster/" + name + "-n1"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
}
