package vm

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/systemdtest"
)

// An operator's day under a real systemd, with the example units as shipped
// (contrib/systemd): `systemctl status` names the child's scope so that it can be pasted into
// systemctl; `systemctl stop` of a oneshot example while its job runs leaves the unit
// inactive, not failed; a job that ignores SIGTERM is killed with SIGKILL, and the journal
// says so.
func TestOperatorUnderSystemd(t *testing.T) {
	e := newEnv(t)
	n := e.boot(t)
	n.installExamples()
	t.Run("status names the scope", func(t *testing.T) { testStatusNamesScope(t, n) })
	t.Run("stop a oneshot example", func(t *testing.T) { testStopOneshot(t, n) })
}

// installExamples puts conch at /usr/bin/conch (where the units expect it) and the shipped
// example units, unchanged, in /etc/systemd/system, with a drop-in naming the test's etcd.
func (n *node) installExamples() {
	n.t.Helper()
	n.sh("ln -sf " + conch + " /usr/bin/conch")
	for _, u := range []string{"conch-maintenance.service", "conch-job@.service", "conch-worker.service"} {
		data, err := os.ReadFile(filepath.Join(systemdtest.ModuleRoot(), "contrib/systemd", u))
		if err != nil {
			n.t.Fatal(err)
		}
		n.write("/etc/systemd/system/"+u, string(data))
		n.write("/etc/systemd/system/"+u+".d/etcd.conf", "[Service]\nEnvironment="+n.env()[0]+"\n")
	}
	n.sh("systemctl daemon-reload")
}

// testStatusNamesScope: the worker example (Type=notify) holds batch-worker, whose scope's
// name has an escaped dash; StatusText names it exactly, and systemctl finds it by that name.
func testStatusNamesScope(t *testing.T, n *node) {
	n.t = t
	n.write("/usr/local/bin/batch-worker", "#!/bin/sh\nexec sleep infinity\n")
	n.sh("systemctl start conch-worker.service") // returns once READY=1: the worker runs
	defer n.sh("systemctl stop conch-worker.service")
	status := n.show("conch-worker.service", "StatusText")["StatusText"]
	m := regexp.MustCompile(`command running \(PID [0-9]+ in (conch-sema-\S+\.scope)\)`).FindStringSubmatch(status)
	scopes := n.scopes()
	if m == nil || len(scopes) != 1 || m[1] != scopes[0] || !strings.Contains(m[1], `batch\x2dworker`) {
		t.Fatalf("StatusText=%q; scopes %q: want the scope's exact name", status, scopes)
	}
	if st := n.show(m[1], "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("systemctl show %s (pasted from the status): ActiveState=%q", m[1], st)
	}
}

// testStopOneshot stops each oneshot example while its job runs: conch stops the job,
// releases and dies of SIGTERM, which SuccessExitStatus= in the units counts as success.
// The job of conch-job@ ignores SIGTERM: the move to SIGKILL is logged.
func testStopOneshot(t *testing.T, n *node) {
	n.t = t
	n.write("/usr/local/sbin/node-maintenance", "#!/bin/sh\necho $$ > /var/tmp/maint.started\nexec sleep infinity\n")
	n.write("/usr/local/libexec/conch-jobs/stubborn", "#!/bin/sh\ntrap '' TERM\necho $$ > /var/tmp/stubborn.started\nwhile :; do sleep 1; done\n")
	for _, tc := range []struct{ unit, started string }{
		{"conch-maintenance.service", "/var/tmp/maint.started"},
		{"conch-job@stubborn.service", "/var/tmp/stubborn.started"},
	} {
		n.sh("systemctl start --no-block " + tc.unit)
		n.await(tc.started)
		n.sh("systemctl stop " + tc.unit) // returns once the unit has stopped
		st := n.show(tc.unit, "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
		if st["ActiveState"] != "inactive" || st["Result"] != "success" {
			t.Errorf("%s after systemctl stop: %v, want inactive, result success", tc.unit, st)
		}
		if failed := n.sh("systemctl list-units --failed --no-legend --plain"); strings.Contains(failed, tc.unit) {
			t.Errorf("systemctl --failed lists %s:\n%s", tc.unit, failed)
		}
	}
	n.noScopeLeft()
	log := n.sh("journalctl --no-pager -o cat -u conch-job@stubborn.service")
	if !strings.Contains(log, "did not stop within 5s of SIGTERM (--kill-after): it is killed with SIGKILL") {
		t.Errorf("journal of conch-job@stubborn.service lacks the move to SIGKILL:\n%s", log)
	}
}
