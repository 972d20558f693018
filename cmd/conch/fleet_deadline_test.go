package main

import (
	"strings"
	"testing"
	"time"
)

// --deadline's parser, with the clock injected: RFC 3339 as given (past
// included), HH:MM[:SS] the next such local time: later today, or
// tomorrow when already passed, across midnight; bad spellings refused.
func TestParseDeadline(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 12, 1, 23, 59, 30, 0, loc)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "2026-12-01T22:00:00Z", want: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}, // past: the caller decides
		{in: "2026-12-02T00:00:30+01:00", want: time.Date(2026, 12, 2, 0, 0, 30, 0, loc)}, // in a minute
		{in: "00:30", want: time.Date(2026, 12, 2, 0, 30, 0, 0, loc)},                     // across midnight
		{in: "23:59:45", want: time.Date(2026, 12, 1, 23, 59, 45, 0, loc)},                // later today
		{in: "23:59:30", want: time.Date(2026, 12, 2, 23, 59, 30, 0, loc)},                // now: the next one
		{in: "23:59", want: time.Date(2026, 12, 2, 23, 59, 0, 0, loc)},                    // just passed: tomorrow
		{in: " 06:00 ", want: time.Date(2026, 12, 2, 6, 0, 0, 0, loc)},                    // blanks
		{in: "2026-12-31T23:59:59.5-08:00", want: time.Date(2026, 12, 31, 23, 59, 59, 5e8, time.FixedZone("", -8*3600))},
		{in: "24:00", bad: true}, {in: "7:00", bad: true}, {in: "07:60", bad: true}, {in: "07:00:61", bad: true},
		{in: "07", bad: true}, {in: "07:00:00:00", bad: true}, {in: "-1:00", bad: true}, {in: "", bad: true},
		{in: "2026-12-01 22:00:00", bad: true}, {in: "2026-12-01T22:00:00", bad: true}, {in: "tomorrow", bad: true},
	} {
		got, err := parseDeadline(c.in, now)
		if (err != nil) != c.bad || !c.bad && !got.Equal(c.want) {
			t.Errorf("parseDeadline(%q) = %v, %v; want %v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

// --deadline end to end: passed, conch exits 75 (or -E) at once and writes
// nothing; ahead, a wait behind a holder ends at it with 75; it excludes
// --wait and --nonblock (64).
func TestDeadlineCLI(t *testing.T) {
	e := newEnv(t)
	r := e.run("sema", "dl", "--max", "1", "--deadline", "2020-01-01T00:00:00Z", "-E", "3", "--", "touch", e.path("ran"))
	if r.status != 3 || exists(e.path("ran")) || !strings.Contains(r.stderr, "has passed") || e.keys("/conch/") != 0 {
		t.Fatalf("past --deadline: %v, want -E's 3 at once, nothing written", r)
	}
	a := e.start("sema", "dl", "--max", "1", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	deadline := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	r = e.run("sema", "dl", "--max", "1", "--deadline", deadline.Format(time.RFC3339), "--", "true")
	late := time.Since(deadline)
	if r.status != 75 || !strings.Contains(r.stderr, "no slot before --deadline") {
		t.Fatalf("wait past --deadline: %v, want 75", r)
	}
	t.Logf("conch gave up %v after its --deadline", late.Round(time.Millisecond))
	if late < 0 {
		t.Fatalf("gave up %v before the deadline", -late)
	}
	e.open("a")
	a.wait(t)
	for _, args := range [][]string{{"--wait", "1s"}, {"--nonblock"}, {"--who"}, {"--bogus-time"}} {
		full := append([]string{"sema", "dl", "--max", "1", "--deadline", "10:00"}, args...)
		if args[0] == "--bogus-time" {
			full = []string{"sema", "dl", "--max", "1", "--deadline", "25:00"}
		}
		if args[0] != "--who" {
			full = append(full, "--", "true")
		}
		if r := e.run(full...); r.status != 64 {
			t.Errorf("%q: %v, want 64", full, r)
		}
	}
}

// A fleet flag given twice is refused (64, naming both values) before any etcd call, not the
// last one taken: two windows, two periods or two holds have no one meaning (D4a).
func TestFleetFlagsGivenOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--deadline", "06:00", "--deadline", "07:00"}, "invalid value for `--deadline': given more than once (\"06:00\", then \"07:00\")"},
		{[]string{"--deadline=", "--deadline", "07:00"}, "`--deadline': given more than once (\"\", then \"07:00\")"},
		{[]string{"--once-per", "1h", "--once-per", "2h"}, "`--once-per': given more than once (\"1h0m0s\", then \"2h\")"},
		{[]string{"--hold-after", "30m", "--hold-after=1h"}, "`--hold-after': given more than once (\"30m0s\", then \"1h\")"},
		{[]string{"--node", "a", "--node", "b"}, "`--node': given more than once (\"a\", then \"b\")"},
		{[]string{"--deadline", ""}, "--deadline: invalid time \"\""},
	} {
		argv := append(append([]string{"sema", "fleet-once", "--max", "1"}, tc.args...), "--", "true")
		var out, errOut strings.Builder
		status, _ := run(argv, &out, &errOut, fixedEnv(map[string]string{"CONCH_ENDPOINTS": "127.0.0.1:1"}))
		if status != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("conch %q: status %d, stderr %s; want 64 and %q", argv, status, errOut.String(), tc.want)
		}
	}
}
