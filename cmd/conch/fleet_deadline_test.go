package main

import (
	"strings"
	"testing"
	"time"
)

// --deadline end to end: passed, conch exits 75 (or -E) at once and writes
// nothing; ahead, a wait behind a holder ends at it with 75; it excludes
// --wait and --nonblock (64).
func TestDeadlineCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "dl", "--max", "1", "--deadline", "2020-01-01T00:00:00Z", "-E", "3", "--", "touch", e.path("ran"))
	if r.status != 3 || exists(e.path("ran")) || !strings.Contains(r.stderr, "has passed") || e.keys("/conch/") != 0 {
		t.Fatalf("past --deadline: %v, want -E's 3 at once, nothing written", r)
	}
	// the time is shown as given, also before 1970 (which conch keeps as 1970)
	r = e.run("sema", "dl", "--max", "1", "--deadline", "1969-01-01T00:00:00Z", "--", "touch", e.path("ran"))
	if r.status != 75 || exists(e.path("ran")) || !strings.Contains(r.stderr, "--deadline 1969-01-01T00:00:00Z has passed") {
		t.Fatalf("--deadline before 1970: %v, want 75 and the time as given", r)
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
