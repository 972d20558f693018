package packaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/systemdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fleetTimeout bounds the whole fleet test; a healthy run takes well under a minute.
const fleetTimeout = 5 * time.Minute

// Test jobs installed in the nodes where the example units expect them. They are the
// workload, not the test's synchronisation: the maintenance job holds its slot until the
// test creates its release file, the worker runs until stopped. Both record the
// environment conch gave them.
const (
	maintenanceJob = `#!/bin/sh
env > /var/tmp/maintenance.env
touch /var/tmp/maintenance.started
while [ ! -e /var/tmp/maintenance.release ]; do sleep 0.05; done
rm -f /var/tmp/maintenance.release /var/tmp/maintenance.started
echo "done rev=$CONCH_REV" >> /var/tmp/maintenance.runs
`
	workerJob = `#!/bin/sh
env > /var/tmp/worker.env
exec sleep infinity
`
	reindexJob = `#!/bin/sh
echo "reindex rev=$CONCH_REV max=$CONCH_MAX" > /var/tmp/reindex.out
`
)

// node is one booted Debian 12 node with the .deb installed.
type node struct {
	*systemdtest.Node
	t   *testing.T
	ctx context.Context
}

// must runs argv in the node outside any unit (systemctl, journalctl, dpkg) and fails the
// test when it exits non-zero.
func (n *node) must(argv ...string) string {
	n.t.Helper()
	res, err := n.Nsenter(n.ctx, argv...)
	if err != nil {
		n.t.Fatalf("node %s: %v", n.Name(), err)
	}
	return string(res.Stdout)
}

func (n *node) sh(script string) string {
	n.t.Helper()
	return n.must("/bin/sh", "-c", script)
}

func (n *node) write(path, data string, perm os.FileMode) {
	n.t.Helper()
	if err := n.WriteFile(n.ctx, path, []byte(data), perm); err != nil {
		n.t.Fatalf("node %s: %v", n.Name(), err)
	}
}

// show returns properties of a unit (systemctl show -p).
func (n *node) show(unit string, props ...string) map[string]string {
	n.t.Helper()
	m, err := n.Show(n.ctx, unit, props...)
	if err != nil {
		n.t.Fatalf("node %s: systemctl show %s: %v", n.Name(), unit, err)
	}
	return m
}

// exists reports whether path exists in the node.
func (n *node) exists(path string) bool {
	_, err := n.Nsenter(n.ctx, "test", "-e", path)
	return err == nil
}

// waitFor polls cond (every 20 ms) until it holds, failing the test after fleetTimeout.
func (n *node) waitFor(what string, cond func() bool) {
	n.t.Helper()
	if err := systemdtest.WaitFor(n.ctx, what+" on "+n.Name(), func() (bool, error) { return cond(), nil }); err != nil {
		n.t.Fatal(err)
	}
}

// journal returns the node's native journal entries matching the journalctl matches
// (e.g. CONCH_SEMA=x), oldest first, as string fields.
func (n *node) journal(matches ...string) []map[string]string {
	n.t.Helper()
	out := n.must(append([]string{"journalctl", "--no-pager", "-o", "json", "--output-fields=MESSAGE,PRIORITY,SYSLOG_IDENTIFIER,_SYSTEMD_UNIT,OBJECT_SYSTEMD_UNIT,CONCH_SEMA,CONCH_MAX,CONCH_REV,CONCH_STATE,CONCH_LEASE,CONCH_AHEAD,CONCH_EXIT_STATUS"}, matches...)...)
	var entries []map[string]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, "-- ") {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			n.t.Fatalf("journalctl -o json line %q: %v", l, err)
		}
		e := map[string]string{}
		for k, v := range raw {
			e[k] = fmt.Sprint(v)
		}
		entries = append(entries, e)
	}
	return entries
}

// states returns the CONCH_STATE of each entry.
func states(entries []map[string]string) []string {
	var s []string
	for _, e := range entries {
		s = append(s, e["CONCH_STATE"])
	}
	return s
}

// bootWithPackage boots a node, installs the .deb with dpkg from /var/tmp and checks that
// the package enabled nothing.
func bootWithPackage(t *testing.T, ctx context.Context, deb []byte, name string) *node {
	t.Helper()
	n := &node{Node: systemdtest.Boot(t, systemdtest.Options{Name: name}), t: t, ctx: ctx}
	n.write("/var/tmp/conch.deb", string(deb), 0o644)
	start := time.Now()
	n.must("dpkg", "-i", "/var/tmp/conch.deb")
	t.Logf("node %s: dpkg -i took %v", n.Name(), time.Since(start).Round(time.Millisecond))
	if got := n.must("dpkg-query", "-W", "-f", "${Status} ${Version}", "conch"); got != "install ok installed "+built.version {
		t.Fatalf("node %s: dpkg-query says %q", n.Name(), got)
	}
	if got := strings.TrimSpace(n.must("conch", "--version")); got != "conch "+built.version {
		t.Fatalf("node %s: conch --version = %q", n.Name(), got)
	}
	// list-unit-files exits 1 when nothing matches, which is what we want.
	if res, _ := n.Systemctl(ctx, "list-unit-files", "--no-legend", "conch*"); strings.TrimSpace(string(res.Stdout)) != "" {
		t.Fatalf("node %s: the package installed units (none expected):\n%s", n.Name(), res.Stdout)
	}
	n.write("/usr/local/sbin/node-maintenance", maintenanceJob, 0o755)
	n.write("/usr/local/bin/batch-worker", workerJob, 0o755)
	return n
}

// useConchConf points the packaged /etc/conch/conch.conf at endpoint, as an admin would:
// by uncommenting its endpoints line.
func (n *node) useConchConf(endpoint string) {
	n.t.Helper()
	n.sh(`sed -i 's|^# endpoints = .*|endpoints = ` + endpoint + `|' /etc/conch/conch.conf && grep -q '^endpoints = ` + endpoint + `$' /etc/conch/conch.conf`)
}

// useEnvironmentFile leaves conch.conf as shipped and gives the example units the endpoint
// through the conch-etcd.conf drop-in and /etc/conch/etcd.env.
func (n *node) useEnvironmentFile(endpoint string, units ...string) {
	n.t.Helper()
	n.write("/etc/conch/etcd.env", "CONCH_ENDPOINTS="+endpoint+"\n", 0o600)
	for _, u := range units {
		n.sh("mkdir -p /etc/systemd/system/" + u + ".d && cp /usr/share/doc/conch/examples/conch-etcd.conf /etc/systemd/system/" + u + ".d/")
	}
}

// installExamples copies the example units, unchanged, into /etc/systemd/system, checks
// them with systemd-analyze verify and enables the maintenance timer.
func (n *node) installExamples() {
	n.t.Helper()
	n.sh(`cd /usr/share/doc/conch/examples && cp conch-worker.service conch-maintenance.service conch-maintenance.timer conch-job@.service /etc/systemd/system/`)
	n.must("systemctl", "daemon-reload")
	n.must("systemd-analyze", "verify", "--man=no", "conch-worker.service", "conch-maintenance.service", "conch-maintenance.timer")
	n.must("systemd-analyze", "verify", "--man=no", "/usr/share/doc/conch/examples/conch-metrics.service", "/usr/share/doc/conch/examples/conch-metrics.timer")
	n.must("systemd-analyze", "verify", "--man=no", "/usr/share/doc/conch/examples/conch-fleetlock.service")
	n.sh(`cd /usr/share/doc/conch/examples && cp conch-rolling-reboot.service conch-rolling-reboot.timer conch-rolling-reboot-release.service conch-ha-job.service conch-ha-job.timer /etc/systemd/system/`)
	n.must("systemctl", "daemon-reload")
	n.must("systemd-analyze", "verify", "--man=no", "conch-rolling-reboot.service", "conch-rolling-reboot.timer", "conch-rolling-reboot-release.service", "conch-ha-job.service", "conch-ha-job.timer")
	n.must("systemctl", "enable", "--now", "conch-maintenance.timer")
	if st := n.show("conch-maintenance.timer", "ActiveState", "UnitFileState", "Triggers"); st["ActiveState"] != "active" || st["UnitFileState"] != "enabled" || st["Triggers"] != "conch-maintenance.service" {
		n.t.Fatalf("node %s: timer %v", n.Name(), st)
	}
}

// The .deb on real systemd nodes sharing a real etcd: the example maintenance timer and
// service let only N nodes work at once and a skipped run exits 75 without failing the
// unit; the Type=notify worker shows its queue position in `systemctl status` and becomes
// active only when it holds a slot; journalctl CONCH_SEMA=<name> has the WAIT, HELD and
// RELEASED entries with their fields (D10); the child never sees NOTIFY_SOCKET (D5).
func TestDebOnSystemdNodes(t *testing.T) {
	needPackages(t)
	ctx := testContext(t, fleetTimeout)
	began := time.Now()
	deb, err := os.ReadFile(built.deb)
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Start(t)
	client := etcd.Client(t)
	nodes := []*node{
		bootWithPackage(t, ctx, deb, "pkg1"),
		bootWithPackage(t, ctx, deb, "pkg2"),
		bootWithPackage(t, ctx, deb, "pkg3"),
	}
	nodes[0].useConchConf(etcd.Endpoint)
	nodes[1].useEnvironmentFile(etcd.Endpoint, "conch-maintenance.service", "conch-worker.service")
	nodes[2].useConchConf(etcd.Endpoint)
	for _, n := range nodes {
		n.installExamples()
	}
	t.Logf("3 nodes booted, package installed, examples enabled in %v", time.Since(began).Round(time.Millisecond))

	// Each phase starts from the state the one before left: stop at the first failure.
	_ = t.Run("maintenance", func(t *testing.T) { testMaintenance(t, nodes) }) &&
		t.Run("timer", func(t *testing.T) { testTimerFires(t, nodes[2]) }) &&
		t.Run("template", func(t *testing.T) { testTemplate(t, nodes[0]) }) &&
		t.Run("worker", func(t *testing.T) { testWorker(t, nodes) }) &&
		t.Run("metrics", func(t *testing.T) { testMetrics(t, nodes[0], client) })
	for _, n := range nodes {
		n.t = t
	}

	resp, err := client.Get(ctx, "/conch/v1/sema/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("keys left in etcd: %v (%v)", resp, err)
	}
	t.Logf("fleet test took %v", time.Since(began).Round(time.Millisecond))
}

// testMaintenance starts conch-maintenance.service on three nodes at once: --max 2
// --nonblock lets exactly two work and the third exits 75, which the unit takes as success.
func testMaintenance(t *testing.T, nodes []*node) {
	for _, n := range nodes {
		n.t = t
		n.must("systemctl", "start", "--no-block", "conch-maintenance.service")
	}
	var ran, skipped []*node
	for _, n := range nodes {
		n.waitFor("the maintenance job to start or be skipped", func() bool {
			if n.exists("/var/tmp/maintenance.started") {
				ran = append(ran, n)
				return true
			}
			if st := n.show("conch-maintenance.service", "ActiveState", "ExecMainExitTimestampMonotonic"); st["ActiveState"] != "activating" && st["ExecMainExitTimestampMonotonic"] != "0" {
				skipped = append(skipped, n)
				return true
			}
			return false
		})
	}
	if len(ran) != 2 || len(skipped) != 1 {
		t.Fatalf("%d nodes ran the job and %d skipped it; want 2 and 1 (--max 2)", len(ran), len(skipped))
	}
	skip := skipped[0]
	st := skip.show("conch-maintenance.service", "ActiveState", "Result", "ExecMainStatus", "ExecMainCode")
	if st["ActiveState"] != "inactive" || st["Result"] != "success" || st["ExecMainStatus"] != "75" {
		t.Errorf("skipped run on %s: %v; want inactive, result success, status 75 (SuccessExitStatus=75)", skip.Name(), st)
	}
	if failed := skip.must("systemctl", "list-units", "--failed", "--no-legend"); strings.Contains(failed, "conch") {
		t.Errorf("failed units on %s:\n%s", skip.Name(), failed)
	}
	var timeout []map[string]string
	skip.waitFor("the TIMEOUT journal entry", func() bool {
		timeout = skip.journal("CONCH_SEMA=node-maintenance", "CONCH_STATE=TIMEOUT")
		return len(timeout) == 1
	})
	// conch exits right after this entry, often before journald reads its unit from /proc:
	// the entry names the unit itself, so journalctl -u and systemctl status show it.
	if e := timeout[0]; e["PRIORITY"] != "4" || e["CONCH_MAX"] != "2" || e["OBJECT_SYSTEMD_UNIT"] != "conch-maintenance.service" || !strings.Contains(e["MESSAGE"], "no free slot") {
		t.Errorf("TIMEOUT entry: %v", e)
	}
	if out := skip.must("journalctl", "--no-pager", "-u", "conch-maintenance.service"); !strings.Contains(out, "node-maintenance[max=2]: no free slot: all 2 held") {
		t.Errorf("journalctl -u conch-maintenance.service lacks the reason for exit 75:\n%s", out)
	}

	// Two holders on two hosts, seen from a node through the installed conch.
	res, err := nodes[0].Run(nodes[0].ctx, "/usr/bin/conch", "sema", "node-maintenance", "--who", "--json")
	if err != nil {
		t.Fatalf("--who: %v", err)
	}
	var who []struct{ State, Host string }
	if err := json.Unmarshal(res.Stdout, &who); err != nil {
		t.Fatalf("--who --json: %v: %s", err, res.Stdout)
	}
	var hosts []string
	for _, w := range who {
		if w.State != "HELD" {
			t.Errorf("--who: %+v", w)
		}
		hosts = append(hosts, w.Host)
	}
	slices.Sort(hosts)
	want := []string{ran[0].Name(), ran[1].Name()}
	slices.Sort(want)
	if !slices.Equal(hosts, want) {
		t.Errorf("--who holders %v, want %v", hosts, want)
	}

	// Release both; each run ends cleanly and leaves HELD and RELEASED in its journal.
	for _, n := range ran {
		n.must("touch", "/var/tmp/maintenance.release") // atomic: the job removes it as soon as it appears
	}
	for _, n := range ran {
		n.waitFor("the maintenance run to end", func() bool {
			return n.show("conch-maintenance.service", "ActiveState")["ActiveState"] == "inactive"
		})
		if st := n.show("conch-maintenance.service", "Result", "ExecMainStatus"); st["Result"] != "success" || st["ExecMainStatus"] != "0" {
			t.Errorf("run on %s: %v", n.Name(), st)
		}
		env := systemdtest.KeyValues(n.sh("cat /var/tmp/maintenance.env"))
		var entries []map[string]string
		defer func() {
			if t.Failed() {
				t.Logf("journal entries of node-maintenance on %s: %v", n.Name(), entries)
			}
		}()
		n.waitFor("HELD and RELEASED journal entries", func() bool {
			entries = n.journal("CONCH_SEMA=node-maintenance")
			return slices.Equal(states(entries), []string{"HELD", "RELEASED"})
		})
		for _, e := range entries {
			if e["CONCH_MAX"] != "2" || e["CONCH_REV"] != env["CONCH_REV"] || e["CONCH_REV"] == "" || e["SYSLOG_IDENTIFIER"] != "conch" || e["OBJECT_SYSTEMD_UNIT"] != "conch-maintenance.service" {
				t.Errorf("%s entry on %s: %v (the job saw CONCH_REV=%s)", e["CONCH_STATE"], n.Name(), e, env["CONCH_REV"])
			}
		}
		if entries[1]["CONCH_EXIT_STATUS"] != "0" {
			t.Errorf("RELEASED entry: %v", entries[1])
		}
	}
	out, _ := ran[0].Nsenter(ran[0].ctx, "journalctl", "--no-pager", "-o", "verbose", "CONCH_SEMA=node-maintenance")
	t.Logf("journalctl -o verbose CONCH_SEMA=node-maintenance on %s:\n%s", ran[0].Name(), out.Stdout)
}

// testTimerFires lets the example timer start the service itself: a drop-in (the test's
// only change to the timer) makes it fire a second after it is restarted.
func testTimerFires(t *testing.T, n *node) {
	n.t = t
	n.write("/etc/systemd/system/conch-maintenance.timer.d/soon.conf",
		"[Timer]\nOnCalendar=\nOnActiveSec=1s\nRandomizedDelaySec=0\nAccuracySec=1ms\nPersistent=false\n", 0o644)
	n.must("systemctl", "daemon-reload")
	n.must("systemctl", "restart", "conch-maintenance.timer")
	n.waitFor("the timer to start the maintenance job", func() bool { return n.exists("/var/tmp/maintenance.started") })
	n.must("touch", "/var/tmp/maintenance.release") // atomic: the job removes it as soon as it appears
	n.waitFor("the timer's run to end", func() bool {
		return n.exists("/var/tmp/maintenance.runs") && n.show("conch-maintenance.service", "ActiveState")["ActiveState"] == "inactive"
	})
	if st := n.show("conch-maintenance.service", "Result", "ExecMainStatus"); st["Result"] != "success" || st["ExecMainStatus"] != "0" {
		t.Errorf("timer's run: %v", st)
	}
	if st := n.show("conch-maintenance.timer", "LastTriggerUSecMonotonic"); st["LastTriggerUSecMonotonic"] == "0" {
		t.Errorf("timer never triggered: %v", st)
	}
}

// testTemplate runs one instance of conch-job@.service: the instance names the job and the
// semaphore, and the per-job environment file sets --max.
func testTemplate(t *testing.T, n *node) {
	n.t = t
	n.write("/usr/local/libexec/conch-jobs/reindex", reindexJob, 0o755)
	n.write("/etc/conch/jobs/reindex.env", "JOB_MAX=3\n", 0o644)
	n.must("systemd-analyze", "verify", "--man=no", "conch-job@reindex.service")
	n.must("systemctl", "start", "conch-job@reindex.service") // oneshot: returns when done
	if got := strings.TrimSpace(n.sh("cat /var/tmp/reindex.out")); !strings.HasPrefix(got, "reindex rev=") || !strings.HasSuffix(got, " max=3") {
		t.Errorf("job output %q", got)
	}
	n.waitFor("the template's journal entries", func() bool {
		e := n.journal("CONCH_SEMA=reindex", "CONCH_MAX=3", "OBJECT_SYSTEMD_UNIT=conch-job@reindex.service")
		return slices.Equal(states(e), []string{"HELD", "RELEASED"})
	})
}

// testWorker: two nodes run the Type=notify worker, a third queues behind a waiter and shows
// its position in `systemctl status` while "activating"; when a holder stops, the queue
// moves and the third becomes active.
func testWorker(t *testing.T, nodes []*node) {
	for _, n := range nodes {
		n.t = t
	}
	for _, n := range nodes[:2] {
		n.must("systemctl", "start", "--no-block", "conch-worker.service")
	}
	for _, n := range nodes[:2] {
		n.waitFor("the worker to be active", func() bool {
			return n.show("conch-worker.service", "ActiveState")["ActiveState"] == "active"
		})
		if st := n.show("conch-worker.service", "StatusText"); !strings.HasPrefix(st["StatusText"], "holding batch-worker[max=2], rev ") {
			t.Errorf("worker on %s: %v", n.Name(), st)
		}
	}
	// A third contender, in a transient service of node 1, is next in line.
	waiter, err := nodes[0].Start(nodes[0].ctx, "/usr/bin/conch", "sema", "batch-worker", "--max", "2", "--", "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].waitFor("the waiter to enqueue", func() bool {
		res, _ := nodes[0].Run(nodes[0].ctx, "/usr/bin/conch", "sema", "batch-worker", "--who")
		return strings.Count(string(res.Stdout), "\n") == 3
	})

	n3 := nodes[2]
	n3.must("systemctl", "start", "--no-block", "conch-worker.service")
	const status = "waiting for batch-worker[max=2] (2/2 held), 1 ahead"
	n3.waitFor("STATUS= with the queue position", func() bool {
		return n3.show("conch-worker.service", "StatusText")["StatusText"] == status
	})
	if st := n3.show("conch-worker.service", "ActiveState", "SubState"); st["ActiveState"] != "activating" || st["SubState"] != "start" {
		t.Errorf("queued Type=notify worker: %v, want activating/start (no READY=1 before the slot)", st)
	}
	res, _ := n3.Systemctl(n3.ctx, "status", "--no-pager", "--lines=5", "conch-worker.service")
	t.Logf("systemctl status conch-worker.service on %s (queued):\n%s", n3.Name(), res.Stdout)
	if !strings.Contains(string(res.Stdout), `Status: "`+status+`"`) {
		t.Errorf("systemctl status lacks the queue position %q", status)
	}

	// Stopping a holder is a clean stop (conch dies of SIGTERM after releasing), and the
	// queue moves: the waiter runs /bin/true and leaves, then node 3 holds and is ready.
	nodes[0].must("systemctl", "stop", "conch-worker.service")
	if st := nodes[0].show("conch-worker.service", "ActiveState", "Result"); st["ActiveState"] != "inactive" || st["Result"] != "success" {
		t.Errorf("stopped worker on %s: %v", nodes[0].Name(), st)
	}
	if res, err := waiter.Wait(nodes[0].ctx); err != nil {
		t.Errorf("waiter: %v", err)
	} else if res.ExitCode != 0 {
		t.Errorf("waiter exit %d", res.ExitCode)
	}
	n3.waitFor("the queued worker to become active", func() bool {
		return n3.show("conch-worker.service", "ActiveState")["ActiveState"] == "active"
	})
	st := n3.show("conch-worker.service", "StatusText", "WatchdogTimestampMonotonic", "MainPID")
	if !strings.HasPrefix(st["StatusText"], "holding batch-worker[max=2], rev ") || !strings.Contains(st["StatusText"], "command running") {
		t.Errorf("active worker's status: %v", st)
	}
	if st["WatchdogTimestampMonotonic"] == "0" {
		t.Errorf("no watchdog ping recorded (WatchdogSec=30s): %v", st)
	}
	res, _ = n3.Systemctl(n3.ctx, "status", "--no-pager", "--lines=8", "conch-worker.service")
	t.Logf("systemctl status conch-worker.service on %s (holding):\n%s", n3.Name(), res.Stdout)

	// D5: the worker gets CONCH_* and none of conch's systemd plumbing.
	var env map[string]string
	n3.waitFor("the worker's environment dump", func() bool {
		env = systemdtest.KeyValues(n3.sh("cat /var/tmp/worker.env 2>/dev/null || true"))
		return env["CONCH_REV"] != ""
	})
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		if _, ok := env[k]; ok {
			t.Errorf("the worker inherited %s", k)
		}
	}
	if env["CONCH_SEMA"] != "batch-worker" || env["CONCH_MAX"] != "2" {
		t.Errorf("worker environment: CONCH_SEMA=%q CONCH_MAX=%q", env["CONCH_SEMA"], env["CONCH_MAX"])
	}
	if rev, err := strconv.ParseInt(env["CONCH_REV"], 10, 64); err != nil || rev <= 0 {
		t.Errorf("CONCH_REV=%q", env["CONCH_REV"])
	}

	// Stop everything; node 3's journal tells the whole story with its fields.
	for _, n := range nodes[1:] {
		n.must("systemctl", "stop", "conch-worker.service")
		if st := n.show("conch-worker.service", "ActiveState", "Result"); st["ActiveState"] != "inactive" || st["Result"] != "success" {
			t.Errorf("stopped worker on %s: %v", n.Name(), st)
		}
	}
	// WAIT once per change of position (1 ahead, then next in line when the waiter ahead
	// is promoted), then HELD and RELEASED.
	var entries []map[string]string
	n3.waitFor("WAIT, HELD and RELEASED entries", func() bool {
		entries = n3.journal("CONCH_SEMA=batch-worker")
		s := strings.Join(states(entries), " ")
		return strings.HasPrefix(s, "WAIT ") && strings.HasSuffix(s, " HELD RELEASED") &&
			strings.Trim(strings.TrimSuffix(s, " HELD RELEASED"), "WAIT ") == ""
	})
	t.Logf("node %s: batch-worker states %v", n3.Name(), states(entries))
	wait, held, released := entries[0], entries[len(entries)-2], entries[len(entries)-1]
	if wait["CONCH_AHEAD"] != "1" || wait["MESSAGE"] != "batch-worker[max=2]: "+status {
		t.Errorf("WAIT entry: %v", wait)
	}
	for _, e := range entries {
		if e["CONCH_MAX"] != "2" || e["CONCH_REV"] != env["CONCH_REV"] || e["OBJECT_SYSTEMD_UNIT"] != "conch-worker.service" {
			t.Errorf("%s entry: %v (the worker saw CONCH_REV=%s)", e["CONCH_STATE"], e, env["CONCH_REV"])
		}
	}
	if !strings.Contains(held["MESSAGE"], "slot held") || !strings.Contains(released["MESSAGE"], "stopped the child and released the slot") {
		t.Errorf("HELD %q / RELEASED %q", held["MESSAGE"], released["MESSAGE"])
	}
	out, err := n3.Nsenter(n3.ctx, "journalctl", "--no-pager", "-o", "verbose", "CONCH_SEMA=batch-worker")
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("journalctl -o verbose: %v", err)
	}
	t.Logf("journalctl -o verbose CONCH_SEMA=batch-worker on %s:\n%s", n3.Name(), out.Stdout)
}

// testMetrics runs the example conch-metrics.service once, as its timer would: it writes the
// Prometheus text file where node_exporter's textfile collector reads it (a pause key put by
// hand shows as conch_sema_paused 1), and an idle cluster (exit 1) is a success; the timer
// enables.
func testMetrics(t *testing.T, n *node, client *clientv3.Client) {
	n.t = t
	ctx := testContext(t, time.Minute)
	if _, err := client.Put(ctx, "/conch/v1/pause/fleet/2", `{"who":"test"}`); err != nil {
		t.Fatal(err)
	}
	defer client.Delete(context.Background(), "/conch/v1/pause/fleet/2")
	n.sh(`cd /usr/share/doc/conch/examples && cp conch-metrics.service conch-metrics.timer /etc/systemd/system/ && mkdir -p /var/lib/prometheus/node-exporter`)
	n.must("systemctl", "daemon-reload")
	n.must("systemctl", "start", "conch-metrics.service")
	st := n.show("conch-metrics.service", "Result", "ExecMainStatus")
	prom := n.sh("cat /var/lib/prometheus/node-exporter/conch.prom; ls -a /var/lib/prometheus/node-exporter")
	if st["Result"] != "success" || !strings.Contains(prom, `conch_sema_paused{name="fleet",max="2"} 1`) || strings.Contains(prom, ".tmp") {
		t.Fatalf("conch-metrics.service: %v; the file and its folder:\n%s", st, prom)
	}
	n.must("systemctl", "enable", "--now", "conch-metrics.timer")
	if st := n.show("conch-metrics.timer", "ActiveState"); st["ActiveState"] != "active" {
		t.Fatalf("conch-metrics.timer: %v", st)
	}
}
