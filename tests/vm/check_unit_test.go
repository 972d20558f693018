package vm

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checker must fail when its fault is there: synthetic histories, one per violation.

const msNs = int64(time.Millisecond)

// hist builds a history of children on one semaphore (max 1) from [start, end, keyCreated,
// keyDeleted] in milliseconds; child k has revision 10+k and lease 100+k.
func hist(rows ...[4]int64) ([]childRec, []keyEvent) {
	var chs []childRec
	var evs []keyEvent
	for k, r := range rows {
		rev := int64(10 + k)
		key := "/conch/v1/sema/x/1/" + string(rune('a'+k))
		chs = append(chs, childRec{ID: key, Node: "n", Rev: strconv.FormatInt(rev, 10), Lease: strconv.FormatInt(100+int64(k), 16), Start: r[0] * msNs, End: r[1] * msNs})
		evs = append(evs, keyEvent{Put: true, Key: key, CreateRev: rev, ModRev: rev, Lease: 100 + int64(k), Mono: r[2] * msNs})
		evs = append(evs, keyEvent{Put: false, Key: key, CreateRev: rev, ModRev: 100 + rev, Lease: 100 + int64(k), Mono: r[3] * msNs})
	}
	sortEvents(evs)
	return chs, evs
}

func TestCheckerFindsViolations(t *testing.T) {
	spec := checkSpec{Max: 1, Handoff: 500 * time.Millisecond, Slop: 100 * time.Millisecond}
	for _, tc := range []struct {
		name string
		rows [][4]int64
		want string // a violation that must be reported; "" for none
	}{
		{"clean hand-off", [][4]int64{{10, 1000, 5, 1010}, {1050, 2000, 6, 2010}}, ""},
		{"two at once", [][4]int64{{10, 1000, 5, 1010}, {500, 2000, 6, 2010}}, "ran at once"},
		{"slot idle while waiting", [][4]int64{{10, 1000, 5, 1010}, {3000, 4000, 6, 4010}}, "stayed free"},
		// the violation tells a late child start (ranked at once, started 2 s later) from a late release
		{"slot idle: what the keys did", [][4]int64{{10, 1000, 5, 1010}, {3000, 4000, 6, 4010}}, "rev 11: ranked +1.005s, child +2.995s..+3.995s, key gone +4.005s"},
		{"child outlived its key", [][4]int64{{10, 3000, 5, 2000}, {3100, 4000, 6, 4010}}, "after etcd deleted its key"},
		{"started before ranked", [][4]int64{{10, 1000, 5, 1200}, {1050, 2000, 6, 2010}}, "before etcd ranked"},
		{"key left", [][4]int64{{10, 1000, 5, 1 << 40}}, "still in etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chs, evs := hist(tc.rows...)
			r := check(chs, evs, spec, 1<<39)
			got := strings.Join(r.Violations, "; ")
			if tc.want == "" && r.failed() || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// Idle time before Settled is not judged, and a span that crosses it is judged from it on.
func TestCheckerSettled(t *testing.T) {
	chs, evs := hist([4]int64{10, 1000, 5, 1010}, [4]int64{3000, 4000, 6, 4010})
	for _, tc := range []struct {
		settled int64 // ms; 0 judges everything
		idle    bool
	}{{0, true}, {2800, false}, {2000, true}, {5000, false}} {
		spec := checkSpec{Max: 1, Handoff: 500 * time.Millisecond, Slop: 100 * time.Millisecond, Settled: tc.settled * msNs}
		if got := len(check(chs, evs, spec, 1<<39).Idle) > 0; got != tc.idle {
			t.Errorf("settled at %d ms: idle slot reported %v, want %v", tc.settled, got, tc.idle)
		}
	}
}

// Idle time inside a leaderless span is not counted against Handoff; what is left of an idle
// span is judged, and the violation says how much was left out. Rows as in hist: the slot is
// free from 1000 to 3000 ms while the second key waits.
func TestCheckerLeaderless(t *testing.T) {
	chs, evs := hist([4]int64{10, 1000, 5, 1010}, [4]int64{3000, 4000, 6, 4010})
	for _, tc := range []struct {
		name       string
		leaderless []span // ms
		want       string // the idle violation's text; "" for none
	}{
		{"idle span inside", []span{{900, 3100}}, ""},
		{"idle span split by one, short remainders", []span{{1200, 2900}}, ""},
		{"two that overlap, counted once", []span{{900, 2000}, {1200, 2000}}, "1s of it with etcd leaderless"},
		{"idle span goes on past it by more than Handoff", []span{{900, 2000}}, "stayed free for 2s while someone waited, from +995ms (one hand-off: 500ms); 1s of it with etcd leaderless, not counted"},
		{"before the idle span", []span{{0, 999}}, "stayed free for 2s while someone waited, from +995ms (one hand-off: 500ms)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := checkSpec{Max: 1, Handoff: 500 * time.Millisecond, Slop: 100 * time.Millisecond}
			for _, l := range tc.leaderless {
				spec.Leaderless = append(spec.Leaderless, span{l.From * msNs, l.To * msNs})
			}
			r := check(chs, evs, spec, 1<<39)
			got := strings.Join(r.Violations, "; ")
			if tc.want == "" && r.failed() || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// A leaderless span excuses idle time only: more than Max children at once inside one is
// still a violation, while the idle slot after them, inside it too, is not.
func TestCheckerLeaderlessKeepsOverlaps(t *testing.T) {
	// a and b overlap from 500 to 1000 ms; c's key waits from 6 ms, the slot is free from 2000
	// to 4000 ms
	chs, evs := hist([4]int64{10, 1000, 5, 1010}, [4]int64{500, 2000, 6, 2010}, [4]int64{4000, 5000, 7, 5010})
	spec := checkSpec{Max: 1, Handoff: 500 * time.Millisecond, Slop: time.Second, Leaderless: []span{{0, 4500 * msNs}}}
	r := check(chs, evs, spec, 1<<39)
	if len(r.Overlaps) != 1 || len(r.Idle) != 0 || len(r.Violations) != 1 || !strings.Contains(r.Violations[0], "ran at once for 500ms") {
		t.Errorf("overlaps %v, idle slots %v, violations %q; want the 500 ms overlap only", r.Overlaps, r.Idle, r.Violations)
	}
}

// perRelease tells a flat rate from a herd: with 200 waiters, a release that wakes every
// waiter sends as many events as there are waiters, so the long queue's rate is higher.
func TestPerReleaseSeesAHerd(t *testing.T) {
	var flat, herd []sample
	ev, hev := 0.0, 0.0
	for released := 0; released <= 200; released += 10 {
		flat = append(flat, sample{created: 200, released: released, events: ev})
		herd = append(herd, sample{created: 200, released: released, events: hev})
		ev += 10 * 8
		hev += 10 * float64(200-released)
	}
	long, short, ok := perRelease(flat, 200)
	if !ok || long > 2*short+2 {
		t.Errorf("flat samples: %.1f vs %.1f (ok %v), want flat", long, short, ok)
	}
	long, short, ok = perRelease(herd, 200)
	if !ok || long <= 2*short+2 {
		t.Errorf("herd samples: %.1f vs %.1f (ok %v), want the long queue's rate far higher", long, short, ok)
	}
}
