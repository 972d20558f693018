package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// D16, D10: a waiter held back by a pause says so in STATUS= and the
// journal, with who, when and why; the line changes when the pause goes.
// D13: a slot kept after the run is CONCH_STATE=HELD_AFTER with the node
// and the end of the hold, and STATUS= says it.
func TestReporterFleetStates(t *testing.T) {
	var f fakeSinks
	r, _ := f.reporter(false, true)
	since := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	p := &schema.Pause{Who: "root@n1", Since: since, Reason: "freeze"}
	r.onEvent(sema.Event{Kind: sema.Waiting, Paused: p})
	r.onEvent(sema.Event{Kind: sema.Waiting})
	if len(f.notes) != 2 || !strings.Contains(f.notes[0], "STATUS=waiting for heavy-jobs[max=2]: paused by root@n1 since 2026-12-01T23:00:00Z: freeze") ||
		strings.Contains(f.notes[1], "paused") {
		t.Fatalf("notify while paused, then not: %q", f.notes)
	}
	until := since.Add(10 * time.Minute)
	r.heldAfter(sema.HeldAfter{Rev: 7, TTL: 10 * time.Minute, Node: "n1", Ended: since, Until: until}, 0)
	last := f.entries[len(f.entries)-1]
	if last.fields["CONCH_STATE"] != "HELD_AFTER" || last.fields["CONCH_NODE"] != "n1" || last.fields["CONCH_HELD_UNTIL"] != "2026-12-01T23:10:00Z" ||
		!strings.Contains(last.msg, "slot kept for 10m0s after the run") {
		t.Fatalf("held-after journal entry: %+v", last)
	}
	if n := f.notes[len(f.notes)-1]; !strings.Contains(n, "STATUS=heavy-jobs[max=2]: slot kept after the run until 2026-12-01T23:10:00Z (node n1)") {
		t.Fatalf("held-after notify: %q", n)
	}
}

// D15, D10: a skipped run is a journal entry with CONCH_SKIPPED=1 naming
// the run that closed the period.
func TestReporterSkipped(t *testing.T) {
	var f fakeSinks
	r, _ := f.reporter(false, true)
	end := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	r.skipped(fleet.OnceMarker{OnceRecord: schema.OnceRecord{Node: "n2", Rev: 9, Start: end, End: end}, Left: time.Minute})
	last := f.entries[len(f.entries)-1]
	// the marker's TTL is read in whole seconds: the next run is shown up to 2 s late, never early
	if last.fields["CONCH_SKIPPED"] != "1" || !strings.Contains(last.msg, "node n2 ran it (rev 9)") || !regexp.MustCompile(`\(in 1m[12]s\)`).MatchString(last.msg) {
		t.Fatalf("skipped entry: %+v", last)
	}
}
