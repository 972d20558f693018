package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema/schema"
)

// put writes key=value, bound to lease when it is not 0.
func (e *env) put(key, value string, lease clientv3.LeaseID) {
	e.t.Helper()
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	if _, err := e.c.Put(e.t.Context(), key, value, opts...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) grant() clientv3.LeaseID {
	e.t.Helper()
	g, err := e.c.Grant(e.t.Context(), 120)
	if err != nil {
		e.t.Fatal(err)
	}
	return g.ID
}

// whoJSON runs --who --json with args and decodes its one document.
func (e *env) whoJSON(args ...string) ([]who.Record, result) {
	e.t.Helper()
	r := e.run(append([]string{"sema"}, append(args, "--who", "--json")...)...)
	var recs []who.Record
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		e.t.Fatalf("--who --json is not one JSON document (%v): %v", err, r)
	}
	return recs, r
}

// noRawControl fails if text holds a control character other than the
// line ends, or a line that is not one record.
func noRawControl(t *testing.T, text string, lines int) {
	t.Helper()
	for _, c := range text {
		if c != '\n' && (unicode.IsControl(c) || c > unicode.MaxASCII) {
			t.Fatalf("raw %U in --who output:\n%s", c, text)
		}
	}
	if n := strings.Count(text, "\n"); n != lines {
		t.Fatalf("--who printed %d lines, want %d (one per key):\n%s", n, lines, text)
	}
}

// A host name with a newline and terminal escapes cannot forge a
// HELD line or reach the terminal; a record that decodes but could not be
// re-encoded does not hide the real holder; every key is shown with its
// real key and the lease etcd binds it to.
func TestWhoHostileRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.start("sema", "hr", "--max", "2", "--", "sleep", "60")
	waitFor(t, "holder", func() bool { return e.keys(schema.Prefix("hr", 2)) == 1 })
	real, other := e.grant(), e.grant()
	forged := "evil\nhr[max=2] HELD  trusted pid=1 since=2026-06-12T10:15:00Z rev=1\x1b[2J\x1b]0;pwned\a\u202e"
	rec, _ := json.Marshal(map[string]any{"v": 1, "host": forged, "pid": 1, "since": "2026-06-12T10:15:00Z"})
	e.put(schema.Prefix("hr", 2)+schema.FormatLeaseID(int64(other)), string(rec), real) // name spells another lease
	e.put(schema.Prefix("hr", 2)+"x", `{"v":1,"host":"n","pid":2,"since":"0000-01-01T00:00:00+01:00"}`, real)
	e.put(schema.NamePrefix("hr")+"02/"+schema.FormatLeaseID(int64(real)), `{bad`, 0)

	r := e.run("sema", "hr", "--who")
	noRawControl(t, r.stdout, 4)
	if strings.Count(r.stdout, "\nhr[max=2] HELD") != 1 || !strings.Contains(r.stdout, `evil\x0ahr[max=2]\x20HELD`) || r.status != 0 {
		t.Fatalf("hostile host name not escaped, or a line forged: %v", r)
	}
	if !strings.Contains(r.stdout, "flags=lease-mismatch") || !strings.Contains(r.stdout, "flags=foreign,no-lease,unreadable") ||
		!strings.Contains(r.stdout, "key=/conch/v1/sema/hr/02/") || !strings.Contains(r.stderr, "not conch's") {
		t.Fatalf("odd keys not marked: %v", r)
	}
	recs, r := e.whoJSON("hr")
	if r.status != 0 || len(recs) != 4 {
		t.Fatalf("--who --json: %v", r)
	}
	want := []struct{ state, kind, flags string }{
		{"HELD", "lease", ""}, {"HELD", "lease", "lease-mismatch"}, {"WAIT", "spread", "bad:since"}, {"FOREIGN", "foreign", "foreign,no-lease,unreadable"},
	}
	for i, w := range want {
		got := recs[i]
		if got.State != w.state || got.Kind != w.kind || strings.Join(got.Flags, ",") != w.flags {
			t.Errorf("record %d = %+v, want %+v", i, got, w)
		}
	}
	if *recs[1].Host != forged || *recs[1].Lease != schema.FormatLeaseID(int64(real)) || recs[2].Since != nil || recs[3].Lease != nil {
		t.Fatalf("JSON not exact, or lease not etcd's: %+v", recs)
	}
	if !recs[2].Spread || !strings.Contains(r.stderr, "mixes 2 lease keys and 1 --spread node keys") {
		t.Fatalf("spread key not marked or mix not said (D11): %+v %v", recs[2], r)
	}
	h.cmd.Process.Kill()
}

// --who for a capacity with no keys names those that have.
func TestWhoNamesOtherCapacities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start("sema", "only2", "--max", "2", "--", "sleep", "60")
	waitFor(t, "holder", func() bool { return e.keys(schema.Prefix("only2", 2)) == 1 })
	r := e.run("sema", "only2", "--max", "3", "--who")
	if r.status != 1 || r.stdout != "" || !strings.Contains(r.stderr, "no holders or waiters for only2[max=3]; keys exist for --max 2") {
		t.Fatalf("--who --max 3: %v", r)
	}
	if recs, r := e.whoJSON("only2", "--max", "3"); r.status != 1 || len(recs) != 0 {
		t.Fatalf("--who --max 3 --json: %v", r)
	}
}

// --who with no name lists every semaphore, text and JSON.
func TestWhoEverySemaphore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "--who"); r.status != 1 || r.stdout != "" || !strings.Contains(r.stderr, "no holders or waiters for any semaphore") {
		t.Fatalf("empty: %v", r)
	}
	e.start("sema", "b", "--max", "1", "--", "sleep", "60")
	waitFor(t, "b", func() bool { return e.keys(schema.Prefix("b", 1)) == 1 })
	e.start("sema", "b", "--max", "1", "--", "sleep", "60")
	e.start("sema", "a", "--max", "3", "--", "sleep", "60")
	waitFor(t, "a and b's waiter", func() bool { return e.keys(schema.Prefix("b", 1)) == 2 && e.keys(schema.Prefix("a", 3)) == 1 })
	r := e.run("sema", "--who")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.status != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "a[max=3] HELD") ||
		!strings.HasPrefix(lines[1], "b[max=1] HELD") || !strings.HasPrefix(lines[2], "b[max=1] WAIT") {
		t.Fatalf("conch sema --who: %v", r)
	}
	recs, r := e.whoJSON()
	if r.status != 0 || len(recs) != 3 || recs[0].Name != "a" || recs[2].State != "WAIT" {
		t.Fatalf("conch sema --who --json: %v", r)
	}
	if recs, _ := e.whoJSON("--max", "1"); len(recs) != 2 || recs[0].Name != "b" {
		t.Fatalf("--who --max 1 over every name: %+v", recs)
	}
}

// JSON that cannot be written is a loud failure, never an empty
// document with 0.
func TestWhoOutputFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start("sema", "full", "--max", "1", "--", "sleep", "60")
	waitFor(t, "holder", func() bool { return e.keys(schema.Prefix("full", 1)) == 1 })
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("no /dev/full: %v", err)
	}
	defer full.Close()
	for _, args := range [][]string{{"--who", "--json"}, {"--who"}} {
		cmd := exec.Command(conchBin, append([]string{"sema", "full"}, args...)...)
		cmd.Env, cmd.Stdout = e.vars, full
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		if st := cmd.ProcessState.ExitCode(); st != exitSoftware || !strings.Contains(stderr.String(), "cannot write the listing") {
			t.Fatalf("%q to /dev/full: status %d, stderr %q", args, st, stderr.String())
		}
	}
	// README: a closed pipe (`--who | head -3`) is quiet, with the listing's status (it said
	// "cannot write the listing" and 70 before); a closed stdout (>&-) too, because the Go
	// runtime opens /dev/null on it: the listing is discarded, the status is the listing's
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	defer pw.Close()
	cmd := exec.Command(conchBin, "sema", "full", "--who")
	cmd.Env, cmd.Stdout = e.vars, pw
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Run()
	if st := cmd.ProcessState.ExitCode(); st != 0 || stderr.String() != "" {
		t.Fatalf("--who to a closed pipe: status %d, stderr %q; want 0 (one holder), quiet", st, stderr.String())
	}
	closed := exec.Command("bash", "-c", `"$0" sema full --who >&-`, conchBin)
	closed.Env = e.vars
	if out, err := closed.CombinedOutput(); err != nil {
		t.Fatalf("--who >&-: %v, output %q; want 0 (one holder)", err, out)
	}
}

// The key --who shows holding a slot is the key that
// keeps another run out, and the key it shows as foreign keeps nobody out
// (before, --who said 1/1 held while another run got the slot).
func TestWhoAgreesWithRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(schema.Prefix("ag", 1)+"a/b", `{"v":1,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`, 0)
	if r := e.run("sema", "ag", "--max", "1", "--nonblock", "--", "true"); r.status != exitConflict {
		t.Fatalf("a run beside an unexpected key that --who shows holding: %v, want 75", r)
	}
	if r := e.run("sema", "ag", "--max", "1", "--who"); r.status != 0 || !strings.HasPrefix(r.stdout, "ag[max=1] HELD") || !strings.Contains(r.stdout, "flags=unexpected,no-lease") {
		t.Fatalf("--who beside the unexpected key: %v", r)
	}
	e.put(schema.NamePrefix("fo")+"01/"+schema.FormatLeaseID(1), `{"v":1,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`, 0)
	if r := e.run("sema", "fo", "--max", "1", "--nonblock", "--", "true"); r.status != 0 {
		t.Fatalf("a run beside a foreign key: %v, want the slot", r)
	}
	r := e.run("sema", "fo", "--max", "1", "--who")
	if r.status != 1 || !strings.HasPrefix(r.stdout, "fo[-] FOREIGN") || !strings.Contains(r.stderr, "1 foreign key(s)") {
		t.Fatalf("--who beside the foreign key: %v", r)
	}
}
