package vm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// allUnitsRelease bounds the time from a node's boot to the release of its rolling-reboot
// slot in TestShippedUnitsTogether: the boot target, one poll of the release unit (1 s) and
// one --release, with room for a machine shared by several test binaries.
const allUnitsRelease = 20 * time.Second

// TestShippedUnitsTogether enables every shipped unit (contrib/systemd) at once on the three
// nodes, as a fleet does: the worker (2 hold, 1 queues as a standby), the rolling reboot's
// timer and boot unit, the HA job's, the maintenance's and the metrics' timers. The node that
// hosts the standby reboots through conch-rolling-reboot.service; after its boot the standby
// queues again, and the reboot slot must still free within seconds: a queued worker must not
// hold up the boot, nor the release unit wait for it. It logs the time from the boot to the
// release.
func TestShippedUnitsTogether(t *testing.T) {
	c := newCluster(t)
	s := c.newScenario(t, "rolling-reboot", 1)
	for i, n := range c.nodes {
		installAllUnits(t, s, i, n)
	}
	for _, n := range c.nodes { // one at a time: the last one started is the standby
		s.startUnit(n, "conch-worker.service")
		s.waitFor(n.Name()+"'s worker to hold or queue", func() bool {
			st := workerState(t, s, n)
			return st == "active" || strings.HasPrefix(st, "activating") && strings.Contains(workerStatus(t, s, n), "waiting for")
		})
	}
	standby := -1
	for i, n := range c.nodes {
		if st := workerState(t, s, n); st != "active" {
			if standby >= 0 {
				t.Fatalf("two standbys: %s and %s", c.nodes[standby].Name(), n.Name())
			}
			standby = i
		}
	}
	if standby < 0 {
		t.Fatal("no standby: three workers hold a --max 2 semaphore")
	}
	n := c.nodes[standby]
	t.Logf("%s hosts the standby (%s); it reboots", n.Name(), workerStatus(t, s, n))
	if _, err := n.Nsenter(s.ctx, "touch", "/run/reboot-required"); err != nil {
		t.Fatal(err)
	}
	s.startUnit(n, "conch-rolling-reboot.service")
	s.awaitDown(map[int]bool{standby: true})
	if s.keys() != 1 {
		t.Fatalf("%d keys of the rolling-reboot semaphore while %s is down, want its held-after key", s.keys(), n.Name())
	}
	booting := time.Now()
	s.bootAgain(standby)
	booted := time.Now()
	ctx, cancel := context.WithDeadline(s.ctx, booting.Add(allUnitsRelease))
	defer cancel()
	if err := systemdtest.WaitFor(ctx, "the reboot slot to free", func() (bool, error) { return s.keys() == 0, nil }); err != nil {
		res, _ := n.Nsenter(s.ctx, "systemctl", "status", "--no-pager", "conch-rolling-reboot-release.service", "conch-worker.service")
		state, _ := n.Nsenter(s.ctx, "systemctl", "is-system-running")
		t.Fatalf("the reboot slot still held %v after %s's boot began (system %s): %v\n%s", allUnitsRelease, n.Name(),
			strings.TrimSpace(string(state.Stdout)), err, res.Stdout)
	}
	released := time.Now()
	t.Logf("%s: boot began, booted (default.target) %v later; the reboot slot freed %v after the boot began, %v after default.target",
		n.Name(), ms(booted.Sub(booting)), ms(released.Sub(booting)), ms(released.Sub(booted)))
	s.waitFor(n.Name()+"'s worker to queue again as the standby", func() bool {
		return strings.Contains(workerStatus(t, s, n), "waiting for batch-worker[max=2]")
	})
}

// installAllUnits copies every shipped unit into node i unchanged, with conch at
// /usr/bin/conch, the endpoints in /etc/conch/conch.conf and the commands the units name
// (a worker that runs until stopped, HA and maintenance jobs that succeed); enables the
// timers and the services a fleet enables.
func installAllUnits(t *testing.T, s *scenario, i int, n *systemdtest.Node) {
	t.Helper()
	files := map[string]string{
		"/etc/conch/conch.conf":              "[etcd]\nendpoints = " + strings.Join(s.etcd.Endpoints(i), ",") + "\n",
		"/usr/local/bin/batch-worker":        "#!/bin/sh\nexec sleep infinity\n",
		"/usr/local/sbin/ha-job":             "#!/bin/sh\nexit 0\n",
		"/usr/local/sbin/node-maintenance":   "#!/bin/sh\nexit 0\n",
		"/etc/default/conch-jobs":            "JOB_MAX=1\nJOB_WAIT=10s\n",
		"/usr/local/libexec/conch-jobs/job1": "#!/bin/sh\nexit 0\n",
	}
	for _, u := range []string{"conch-worker.service", "conch-rolling-reboot.service", "conch-rolling-reboot.timer",
		"conch-rolling-reboot-release.service", "conch-ha-job.service", "conch-ha-job.timer", "conch-maintenance.service",
		"conch-maintenance.timer", "conch-metrics.service", "conch-metrics.timer", "conch-job@.service"} {
		files["/etc/systemd/system/"+u] = contribUnit(t, u)
	}
	for path, data := range files {
		if err := n.WriteFile(s.ctx, path, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, argv := range [][]string{{"ln", "-sf", conch, "/usr/bin/conch"}, {"mkdir", "-p", "/var/lib/prometheus/node-exporter"},
		{"systemctl", "daemon-reload"},
		{"systemctl", "enable", "conch-worker.service", "conch-rolling-reboot-release.service", "conch-rolling-reboot.timer",
			"conch-ha-job.timer", "conch-maintenance.timer", "conch-metrics.timer"}} {
		if res, err := n.Nsenter(s.ctx, argv...); err != nil {
			t.Fatalf("%s on %s: %v %s", argv, n.Name(), err, res.Stderr)
		}
	}
}

// workerState is conch-worker.service's ActiveState and SubState on n, as "active" or
// "activating/start".
func workerState(t *testing.T, s *scenario, n *systemdtest.Node) string {
	t.Helper()
	res, _ := n.Systemctl(s.ctx, "show", "-P", "ActiveState", "conch-worker.service")
	return strings.TrimSpace(string(res.Stdout))
}

// workerStatus is conch-worker.service's StatusText on n (conch's STATUS=).
func workerStatus(t *testing.T, s *scenario, n *systemdtest.Node) string {
	t.Helper()
	res, _ := n.Systemctl(s.ctx, "show", "-P", "StatusText", "conch-worker.service")
	return strings.TrimSpace(string(res.Stdout))
}
