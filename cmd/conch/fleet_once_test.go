package main

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// fileLines counts the lines of the file at path (0 when it does not exist).
func fileLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// D15 end to end: a successful run writes the period's marker; the next run,
// from another node, is skipped (exit 0, naming the run and when the next
// may start; its command never runs); a failed first run leaves no marker,
// so the next one runs.
func TestOncePerCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	count := e.path("ran")
	job := "echo run >> " + count
	if r := e.run("sema", "op", "--max", "1", "--once-per", "1h", "--node", "n1", "--", "sh", "-c", job); r.status != 0 || e.keys(schema.OnceKey("op", 1)) != 1 {
		t.Fatalf("first run: %v, want 0 and the marker", r)
	}
	r := e.run("sema", "op", "--max", "1", "--once-per", "1h", "--node", "n2", "--", "sh", "-c", job)
	if r.status != 0 || fileLines(count) != 1 || !strings.Contains(r.stderr, "skipped: this period's run is done: node n1 ran it") ||
		!strings.Contains(r.stderr, "the next run may start after ") {
		t.Fatalf("second run in the period: %v (%d runs), want a skip", r, fileLines(count))
	}
	// the next run's time is never before the marker's end: its lease started after the run's
	// end (shown truncated to the second) and lasts the period, so the time shown, in whole
	// seconds, is at least a second past end + period
	m := regexp.MustCompile(` to (\S+Z); the next run may start after (\S+Z) \(in `).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("skip line without the run's end and the next run's time: %q", r.stderr)
	}
	end, err1 := time.Parse(time.RFC3339, m[1])
	next, err2 := time.Parse(time.RFC3339, m[2])
	if err1 != nil || err2 != nil || next.Before(end.Add(time.Hour+time.Second)) {
		t.Fatalf("the next run may start after %s for a run that ended at %s with --once-per 1h: before the marker's end", m[2], m[1])
	}
	if r := e.run("sema", "opf", "--max", "1", "--once-per", "1h", "--", "sh", "-c", job+"; exit 1"); r.status != 1 || e.keys(schema.OnceKey("opf", 1)) != 0 {
		t.Fatalf("failing run: %v, want 1 and no marker", r)
	}
	if r := e.run("sema", "opf", "--max", "1", "--once-per", "1h", "--", "sh", "-c", job); r.status != 0 || fileLines(count) != 3 || e.keys(schema.OnceKey("opf", 1)) != 1 {
		t.Fatalf("run after a failed one: %v (%d runs), want it to run", r, fileLines(count))
	}
}

// D15: four runs started at once, as a timer on four nodes: exactly one
// runs, the three others are skipped, all exit 0.
func TestOncePerFourAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	count := e.path("ran")
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range 4 {
		wg.Add(1)
		p := e.start("sema", "op4", "--max", "1", "--once-per", "1h", "--", "sh", "-c", "echo run >> "+count)
		go func() { defer wg.Done(); results[i] = p.wait(t) }()
	}
	wg.Wait()
	skips := 0
	for _, r := range results {
		if r.status != 0 {
			t.Fatalf("one of four: %v", r)
		}
		if strings.Contains(r.stderr, "skipped:") {
			skips++
		}
	}
	if fileLines(count) != 1 || skips != 3 {
		t.Fatalf("%d runs and %d skips of four started at once, want 1 and 3", fileLines(count), skips)
	}
}

// D15 against a marker written by hand: garbage without a lease is reported
// and treated as present (the command does not run, and the line says what
// was found and how to clear it).
func TestOncePerGarbageMarker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(schema.OnceKey("opg", 1), "\x1b]0;garbage", 0)
	r := e.run("sema", "opg", "--max", "1", "--once-per", "1h", "--", "touch", e.path("ran"))
	if r.status != 0 || exists(e.path("ran")) || !strings.Contains(r.stderr, "a period marker that cannot be read") ||
		!strings.Contains(r.stderr, "no run starts until it is deleted") || strings.Contains(r.stderr, "\x1b") {
		t.Fatalf("run with a garbage marker: %v", r)
	}
}

// Hostile --once-per: without --max 1, 0, negative or huge periods are
// usage errors (64) before any etcd call.
func TestOncePerUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"--max", "2", "--once-per", "1h", "--", "true"},
		{"--max", "1", "--once-per", "0", "--", "true"},
		{"--max", "1", "--once-per", "-5m", "--", "true"},
		{"--max", "1", "--once-per", "9999999h", "--", "true"},
		{"--max", "1", "--once-per", "1h", "--who"},
	} {
		if r := e.run(append([]string{"sema", "opu"}, args...)...); r.status != 64 || r.stderr == "" {
			t.Errorf("%q: %v, want 64 with a line", args, r)
		}
	}
	if n := e.keys("/conch/"); n != 0 {
		t.Fatalf("%d keys written by refused invocations", n)
	}
}

// D15: the skip line's "next run may start after" is whole seconds, never before the
// marker's end: etcd's remaining TTL is truncated, so up to a second is added, then rounded up.
func TestMarkerEnd(t *testing.T) {
	base := time.Date(2026, 12, 2, 3, 16, 15, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		left time.Duration
		want time.Time
	}{
		{base.Add(300 * time.Millisecond), 58 * time.Second, base.Add(60 * time.Second)}, // ends before 03:17:14.3 + 1 s
		{base, 59 * time.Second, base.Add(60 * time.Second)},                             // a whole second stays
		{base.Add(999 * time.Millisecond), 0, base.Add(2 * time.Second)},
	} {
		if got := markerEnd(c.now, c.left); !got.Equal(c.want) {
			t.Errorf("markerEnd(%s, %v) = %s, want %s", c.now.Format(time.RFC3339Nano), c.left, got.Format(time.RFC3339), c.want.Format(time.RFC3339))
		}
	}
}
