package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// --once-per leaves a trace (D15): after a successful run, --who shows the period's marker
// (node, token, the run, when the next may start) in text, JSON, the metrics and --watch,
// and --reset-period opens the period again, so the next run runs; before, --who said "no
// holders or waiters" and the period could only be cleared with etcdctl del.
func TestOncePerVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "ha", "--max", "1", "--node", "n7", "--once-per", "1h", "--", "true"); r.status != 0 {
		t.Fatal(r)
	}
	r := e.run("sema", "ha", "--who")
	if !strings.Contains(r.stdout, "ONCE ha[max=1] ran on n7 rev=") || !strings.Contains(r.stdout, " next=") {
		t.Fatalf("--who after a --once-per run: %v, want its ONCE line", r)
	}
	r = e.run("sema", "ha", "--who", "--json")
	if !strings.Contains(r.stdout, `"kind": "once"`) || !strings.Contains(r.stdout, `"node": "n7"`) || !strings.Contains(r.stdout, `"next_at": "`) {
		t.Fatalf("--who --json: %v", r)
	}
	r = e.run("sema", "--who", "--format", "prometheus")
	if !strings.Contains(r.stdout, `conch_sema_once_last_success_timestamp_seconds{max="1",name="ha"}`) &&
		!strings.Contains(r.stdout, `conch_sema_once_last_success_timestamp_seconds{name="ha",max="1"}`) {
		t.Fatalf("metrics: %v", r)
	}
	w := e.start("sema", "ha", "--who", "--watch")
	waitFor(t, "--watch's ONCE line", func() bool { return strings.Contains(w.stdout.String(), "ONCE ha[max=1] ran on n7") })
	w.cmd.Process.Signal(syscall.SIGTERM)
	w.wait(t)
	if r := e.run("sema", "ha", "--max", "1", "--once-per", "1h", "--", "touch", e.path("second")); r.status != 0 || exists(e.path("second")) {
		t.Fatalf("a second run in the period: %v, want it skipped", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--reset-period"); r.status != 0 || !strings.Contains(r.stderr, "period open again") || e.keys(schema.OnceRoot) != 0 {
		t.Fatalf("--reset-period: %v", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--once-per", "1h", "--", "touch", e.path("second")); r.status != 0 || !exists(e.path("second")) {
		t.Fatalf("a run after --reset-period: %v, want it run", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--reset-period"); r.status != 0 {
		t.Fatal(r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--reset-period"); r.status != 0 || !strings.Contains(r.stderr, "nothing to reset") {
		t.Fatalf("--reset-period of an open period: %v", r)
	}
}
