package main

import (
	"strings"
	"testing"
	"time"
)

// --deadline HH:MM is read in the zone TZ names: a POSIX TZ string without daylight-saving
// rules is a fixed zone (POSIX's sign: UTC-3 is east), one with rules or none at all is
// refused, never read as UTC (Go's silent fallback).
func TestDeadlineZone(t *testing.T) {
	for _, tc := range []struct {
		tz     string
		offset int // seconds east of UTC
		err    string
	}{
		{"UTC-3", 3 * 3600, ""},
		{"<+0530>-5:30", 5*3600 + 1800, ""},
		{"EST5", -5 * 3600, ""},
		{"<-03>3", -3 * 3600, ""},
		{"XYZ+1:02:03", -(3600 + 2*60 + 3), ""},
		{"CET-1CEST,M3.5.0,M10.5.0/3", 0, "daylight-saving"},
		{"Nope/Zone", 0, "no valid UTC offset"},
		{"5", 0, "neither a time zone"},
		{"UTC+99", 0, "no valid UTC offset"},
	} {
		loc, err := deadlineZone(tc.tz)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TZ=%q: %v, want an error with %q", tc.tz, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("TZ=%q: %v", tc.tz, err)
			continue
		}
		if _, off := time.Now().In(loc).Zone(); off != tc.offset {
			t.Errorf("TZ=%q: offset %d s, want %d", tc.tz, off, tc.offset)
		}
	}
	if loc, err := deadlineZone("Europe/Berlin"); err != nil || loc != time.Local {
		t.Errorf("a zone name: %v %v, want Go's own time.Local", loc, err)
	}
}

// The CLI reads --deadline HH:MM:SS in a POSIX TZ: with TZ=UTC-3 a time two seconds ahead on
// that clock ends the wait then, and the message shows +03:00; before, conch read it as UTC
// (hours away). A TZ with daylight-saving rules is refused (64).
func TestDeadlinePosixTZCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.start("sema", "tzd", "--max", "1", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	east3 := time.FixedZone("east3", 3*3600)
	at := time.Now().Add(2 * time.Second).In(east3).Format("15:04:05")
	e.vars = append(e.vars, "TZ=UTC-3")
	p := e.start("sema", "tzd", "--max", "1", "--deadline", at, "--", "true")
	waitFor(t, "the wait to end at the deadline", p.exited)
	if r := p.wait(t); r.status != 75 || !strings.Contains(r.stderr, "+03:00") {
		t.Fatalf("--deadline %s with TZ=UTC-3: %v, want 75 at that time, shown as +03:00", at, r)
	}
	e.vars = append(e.vars, "TZ=CET-1CEST,M3.5.0,M10.5.0/3")
	if r := e.run("sema", "tzd", "--max", "1", "--deadline", "10:00", "--", "true"); r.status != 64 || !strings.Contains(r.stderr, "daylight-saving") {
		t.Fatalf("--deadline with a TZ with rules: %v, want 64", r)
	}
	e.open("a")
	a.wait(t)
}
