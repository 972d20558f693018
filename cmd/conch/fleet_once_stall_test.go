package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// D15a: an etcd stall across the end of a successful --once-per run, shorter than what is left
// of the run's lease (the single member SIGSTOPped for 6 s as the command ends, --ttl 10s),
// does not lose the period's marker: its grant and write are tried again until the run's lease's
// deadline, so the marker is written once etcd answers, and a second run in the period is
// skipped (its command never runs).
func TestOncePerRidesOutEtcdStall(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	count := e.path("ran")
	job := "echo run >> " + count + "; " + e.gated("a")
	p := e.start("sema", "ops", "--max", "1", "--ttl", "10s", "--once-per", "1h", "--node", "n1", "--scope=never", "--", "sh", "-c", job)
	waitFor(t, "a holds", func() bool { return e.held("a") })
	m.stall(6*time.Second, func() { e.open("a") }) // longer than a single request's old 5 s bound
	r := p.wait(t)
	if r.status != 0 || strings.Contains(r.stderr, "marker could not be written") {
		t.Fatalf("--once-per through a 6 s etcd stall at the run's end: %v, want 0 and the marker written", r)
	}
	if n := e.keys(schema.OnceKey("ops", 1)); n != 1 {
		t.Fatalf("period markers after the stall: %d, want 1", n)
	}
	r = e.run("sema", "ops", "--max", "1", "--ttl", "10s", "--once-per", "1h", "--node", "n2", "--scope=never", "--", "sh", "-c", job)
	if r.status != 0 || fileLines(count) != 1 || !strings.Contains(r.stderr, "skipped: this period's run is done: node n1 ran it") {
		t.Fatalf("second run in the period: %v (%d runs), want it skipped", r, fileLines(count))
	}
}

// D15a: with etcd silent past the run's lease (--ttl 3s, the member SIGSTOPped as the command
// ends and until conch exits), the marker truly cannot be written: conch says so on its own
// warning line (CONCH_MARK_FAILED=1 in the journal) and exits with the command's status, 0.
func TestOncePerMarkFailedSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	p := e.start("sema", "opf", "--max", "1", "--ttl", "3s", "--kill-after", "0.5", "--once-per", "1h", "--scope=never", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	m.stop()
	e.open("a")
	r := p.wait(t)
	m.cont()
	if r.status != 0 || !strings.Contains(r.stderr, "conch: opf[max=1]: WARNING: the run succeeded, but this period's marker could not be written") {
		t.Fatalf("--once-per with etcd silent past the lease: %v, want 0 and the warning", r)
	}
}
