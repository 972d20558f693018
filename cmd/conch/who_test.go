package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema/schema"
)

// D6: --who and --who --json with holders and waiters, and when empty.
func TestWho(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "w", "--max", "2", "--who"); r.status != 1 || r.stdout != "" {
		t.Fatalf("empty --who: %v, want 1 and no output", r)
	}
	if r := e.run("sema", "w", "--who", "--json"); r.status != 1 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("empty --who --json: %v", r)
	}
	var procs []*proc
	for i := range 3 {
		procs = append(procs, e.start("sema", "w", "--max", "2", "--", "sleep", "60"))
		waitFor(t, "enqueue", func() bool { return e.keys(schema.Prefix("w", 2)) == i+1 })
	}
	r := e.run("sema", "w", "--max", "2", "--who")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	line := regexp.MustCompile(`^w\[max=2\] (HELD|WAIT)  \S+ pid=\d+ +since=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ rev=\d+ lease=[0-9a-f]{16} holders=2/2( ttl=\d+s/\d+s)?$`)
	if r.status != 0 || len(lines) != 3 {
		t.Fatalf("--who: %v", r)
	}
	for i, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("line %q does not look like the spec's", l)
		}
		if want := []string{"HELD", "HELD", "WAIT"}[i]; !strings.Contains(l, "] "+want) {
			t.Fatalf("line %d = %q, want %s", i, l, want)
		}
	}
	if !strings.Contains(lines[0], "pid="+strconv.Itoa(procs[0].cmd.Process.Pid)) {
		t.Fatalf("first line %q is not the first conch (pid %d)", lines[0], procs[0].cmd.Process.Pid)
	}
	r = e.run("sema", "w", "--who", "--json")
	var recs []who.Record
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || r.status != 0 || len(recs) != 3 {
		t.Fatalf("--json: %v (%v)", r, err)
	}
	for i, rec := range recs {
		if rec.Name != "w" || rec.Max != 2 || rec.Rank != i || rec.Host == nil || *rec.Host == "" || rec.PID == nil ||
			*rec.PID != procs[i].cmd.Process.Pid || rec.Lease == nil || rec.Rev == 0 || len(rec.Flags) != 0 || rec.Kind != "lease" ||
			rec.Key != schema.Prefix("w", 2)+*rec.Lease {
			t.Fatalf("record %d = %+v", i, rec)
		}
		if want := []string{"HELD", "HELD", "WAIT"}[i]; rec.State != want {
			t.Fatalf("record %d state %s, want %s", i, rec.State, want)
		}
	}
	if strings.Contains(r.stdout, "sleep") {
		t.Fatal("the record leaks the command line (D6)")
	}
	// a second capacity under the same name: loud on stderr, --max filters
	other := e.start("sema", "w", "--max", "1", "--change-max", "--", "sleep", "60") // on purpose (D17)
	waitFor(t, "other capacity", func() bool { return e.keys(schema.Prefix("w", 1)) == 1 })
	r = e.run("sema", "w", "--who")
	if !strings.Contains(r.stderr, "WARNING") || !strings.Contains(r.stderr, "--max 1, --max 2") || len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 4 {
		t.Fatalf("two capacities: %v", r)
	}
	if !strings.Contains(other.stderr.String(), "WARNING") {
		t.Fatalf("acquiring next to another capacity did not warn: %q", other.stderr.String())
	}
	r = e.run("sema", "w", "--max", "1", "--who", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 1 || recs[0].Max != 1 {
		t.Fatalf("--max filter: %v", r)
	}
	for _, p := range append(procs, other) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	}
	if r := e.run("sema", "w", "--who"); r.status != 1 {
		t.Fatalf("after all left: %v", r)
	}
}
