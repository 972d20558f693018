package who

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// Two foreign names that differ only in invalid UTF-8 are two series of
// conch_sema_foreign_keys (U+FFFD for every bad byte made them one series twice, which
// Prometheus refuses).
func TestForeignKeysInvalidUTF8Distinct(t *testing.T) {
	l := Listing{Entries: []Entry{
		{Name: "bad\x80", Info: schema.KeyInfo{Kind: schema.KeyForeign}, Rank: -1},
		{Name: "bad\x81", Info: schema.KeyInfo{Kind: schema.KeyForeign}, Rank: -1},
	}}
	out, err := renderPrometheus(l, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fams := whotest.ParseProm(t, string(out))
	if mf := fams["conch_sema_foreign_keys"]; mf == nil || len(mf.Metric) != 2 {
		t.Fatalf("want two series:\n%s", out)
	}
	if strings.Count(string(out), `conch_sema_foreign_keys{name="bad\\x80"} 1`) != 1 {
		t.Fatalf("the bad byte is not spelled \\x80:\n%s", out)
	}
}

// A period marker (D15) shows in every form: a ONCE line in the text (node, token, the run,
// when the next may start), a record of kind "once" in the JSON, the last success time in
// the metrics; an unreadable one says so.
func TestOnceMarkerRendered(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)
	start, end := now.Add(-5*time.Minute), now.Add(-4*time.Minute)
	l := Listing{Once: []schema.Marker{
		{OnceRecord: schema.OnceRecord{Version: 1, Node: "node2", Rev: 8812, Start: start, End: end}, Name: "ha-job", Max: 1,
			Key: schema.OnceKey("ha-job", 1), Lease: 7, TTL: schema.LeaseTTL{Known: true, Left: 2700, Granted: 3000}},
		{Name: "junk", Max: 1, Key: schema.OnceKey("junk", 1), Err: errString("not a marker record"), Raw: "\x1b[2J"},
	}}
	text, _ := Render(l, Options{}, now)
	want := "ONCE ha-job[max=1] ran on node2 rev=8812 2026-12-01T10:00:00Z..2026-12-01T10:01:00Z next=2026-12-01T10:51:00Z\n"
	if !strings.HasPrefix(string(text), want) || !strings.Contains(string(text), "ONCE junk[max=1] an unreadable period marker") || strings.Contains(string(text), "\x1b") {
		t.Fatalf("text:\n%s\nwant first %q", text, want)
	}
	js, _ := Render(l, Options{Format: JSON}, now)
	for _, w := range []string{`"state": "ONCE"`, `"kind": "once"`, `"node": "node2"`, `"end": "2026-12-01T10:01:00Z"`, `"unreadable": "not a marker record`} {
		if !strings.Contains(string(js), w) {
			t.Errorf("JSON lacks %s:\n%s", w, js)
		}
	}
	prom, _ := Render(l, Options{Format: Prometheus}, now)
	fams := whotest.ParseProm(t, string(prom))
	if got := whotest.PromValue(fams, "conch_sema_once_last_success_timestamp_seconds", "name", "ha-job", "max", "1"); got != float64(end.Unix()) {
		t.Fatalf("last success = %v, want %d:\n%s", got, end.Unix(), prom)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// unit= names the unit that runs conch (its service), as README says, and scope= the
// transient scope its command runs in; before, unit= named the scope and the service was
// nowhere.
func TestUnitAndScopeNamed(t *testing.T) {
	e := Entry{Name: "batch-worker", Max: 2, Rank: 0, Held: true, Rev: 51, Key: schema.Prefix("batch-worker", 2) + schema.FormatLeaseID(7),
		Lease: 7, Info: schema.KeyInfo{Kind: schema.KeyLease, Max: 2},
		Record: schema.ReadRecord{Record: schema.Record{Host: "n1", PID: 9, Unit: "conch-worker.service", Scope: true}}}
	scope := func(name string, rev int64) string { return "conch-sema-" + name + "-51.scope" }
	text, _ := Render(Listing{Entries: []Entry{e}}, Options{Unit: scope}, time.Now())
	if !strings.Contains(string(text), " unit=conch-worker.service scope=conch-sema-batch-worker-51.scope") {
		t.Fatalf("text: %s", text)
	}
	js, _ := Render(Listing{Entries: []Entry{e}}, Options{Format: JSON, Unit: scope}, time.Now())
	if !strings.Contains(string(js), `"unit": "conch-worker.service"`) || !strings.Contains(string(js), `"scope": "conch-sema-batch-worker-51.scope"`) {
		t.Fatalf("json: %s", js)
	}
}
