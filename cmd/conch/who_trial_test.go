package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// The operator trial: 6 --spread jobs on 3 nodes, --max 3. Three hold, the
// other three wait for their own node's key (D11) without a key in the
// queue: --who lists all six, the three with waits-for naming that key.
func TestWhoListsSpreadNodeWaiters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var procs []*proc
	for i, node := range []string{"n1", "n2", "n3", "n1", "n2", "n3"} {
		procs = append(procs, e.start("sema", "trial", "--max", "3", "--spread", "--node", node, "--", "sleep", "60"))
		if i < 3 {
			waitFor(t, "holder "+node, func() bool { return e.keys(schema.Prefix("trial", 3)) == i+1 })
		}
	}
	waitFor(t, "three node waiters", func() bool { return e.keys(schema.NodeWaitRoot) == 3 })
	r := e.run("sema", "trial", "--who")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.status != 0 || len(lines) != 6 {
		t.Fatalf("--who with 6 jobs: %v", r)
	}
	for i, l := range lines {
		want := "trial[max=3] HELD"
		if i >= 3 {
			want = "trial[max=3] WAIT"
			if !strings.Contains(l, "waits-for="+schema.Prefix("trial", 3)+"n") || strings.Contains(l, "flags=") {
				t.Fatalf("node waiter line %q", l)
			}
		}
		if !strings.HasPrefix(l, want) {
			t.Fatalf("line %d %q, want %s", i, l, want)
		}
	}
	recs, _ := e.whoJSON("trial")
	if len(recs) != 6 {
		t.Fatalf("--json lists %d records, want 6", len(recs))
	}
	for _, rec := range recs[3:] {
		if rec.State != "WAIT" || rec.Rank != -1 || rec.WaitsFor == nil || !rec.Spread || rec.PID == nil || len(rec.Flags) != 0 {
			t.Fatalf("node waiter record %+v", rec)
		}
	}
	r = e.run("sema", "--who") // every semaphore: the same six
	if n := strings.Count(strings.TrimSpace(r.stdout), "\n") + 1; r.status != 0 || n != 6 {
		t.Fatalf("--who with no name: %v", r)
	}
	procs[0].cmd.Process.Signal(syscall.SIGTERM) // n1's holder ends: n1's waiter enters the queue
	procs[0].wait(t)
	waitFor(t, "n1's waiter queued", func() bool { return e.keys(schema.NodeWaitRoot) == 2 })
	for _, p := range procs[1:] {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	}
	if n := e.keys("/conch/v1/"); n != 0 {
		t.Fatalf("%d keys left after every job ended", n)
	}
}

// The operator trial: each holder shows its lease's time to live; a holder
// whose conch died (SIGKILL: its lease is no longer kept alive) reads as
// expiring, in the text form and in JSON, until the lease runs out.
func TestWhoHolderTTLExpiring(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	live := e.start("sema", "ttl", "--max", "2", "--ttl", "30s", "--", "sleep", "60")
	waitFor(t, "live holder", func() bool { return e.keys(schema.Prefix("ttl", 2)) == 1 })
	dead := e.start("sema", "ttl", "--max", "2", "--ttl", "4s", "--", "sleep", "60")
	waitFor(t, "second holder", func() bool { return e.keys(schema.Prefix("ttl", 2)) == 2 })
	recs, _ := e.whoJSON("ttl")
	for _, rec := range recs {
		if rec.TTL == nil || rec.GrantedTTL == nil || *rec.TTL <= 0 || rec.Expiring {
			t.Fatalf("healthy holder %+v: want a TTL, not expiring", rec)
		}
	}
	dead.cmd.Process.Signal(syscall.SIGKILL)
	dead.wait(t)
	var text string
	waitFor(t, "the dead holder expiring", func() bool {
		recs, _ = e.whoJSON("ttl")
		text = e.run("sema", "ttl", "--who").stdout
		return len(recs) == 2 && recs[1].Expiring && strings.Contains(text, "flags=expiring")
	})
	if recs[0].Expiring || !strings.Contains(text, " ttl=") {
		t.Fatalf("live holder %+v / text %q", recs[0], text)
	}
	waitFor(t, "the dead holder's key gone", func() bool { return e.keys(schema.Prefix("ttl", 2)) == 1 })
	live.cmd.Process.Signal(syscall.SIGTERM)
	live.wait(t)
}

// Every listing exits as D3 and D6 say, whatever its form: 1 with a line on
// stderr when nothing holds (stdout stays the document), silent with -q.
func TestWhoEmptyExitsEveryForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, form := range [][]string{nil, {"--json"}, {"--format", "json"}, {"--format", "prometheus"}} {
		r := e.run(append([]string{"sema", "idle", "--who"}, form...)...)
		if r.status != 1 || !strings.Contains(r.stderr, "no holders or waiters for idle") {
			t.Fatalf("--who %v on an empty semaphore: %v", form, r)
		}
		if r = e.run(append([]string{"sema", "idle", "--who", "-q"}, form...)...); r.status != 1 || r.stderr != "" {
			t.Fatalf("--who -q %v on an empty semaphore: %v", form, r)
		}
	}
}
