package vm

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The nemesis's checker must fail when its fault is there: synthetic histories, each with one
// thing injected that the rules forbid (or allow), fed to judge.

// synth builds histories for judge: children with their keys, times in milliseconds.
type synth struct{ h nemHistory }

func newSynth(p nemPhase) *synth {
	return &synth{h: nemHistory{Phase: p, Nodes: []string{"n1", "n2", "n3"}, Now: 1 << 40}}
}

// child adds a child on node (index) with its own key: created at keyAt, ranked at once,
// deleted at gone; the child runs from start to end (end 0: never seen to end), how it ended.
func (s *synth) child(node int, start, end, keyAt, gone int64, how string) string {
	rev := int64(10 + len(s.h.Children))
	key := "/conch/v1/sema/x/2/" + strconv.FormatInt(rev, 16)
	id := s.h.Nodes[node] + "-" + strconv.FormatInt(rev, 10)
	s.h.Children = append(s.h.Children, childRec{ID: id, Node: s.h.Nodes[node], Rev: strconv.FormatInt(rev, 10),
		Lease: strconv.FormatInt(100+rev, 16), Start: start * msNs, End: end * msNs, How: how})
	s.h.Keys = append(s.h.Keys,
		keyEvent{Put: true, Key: key, CreateRev: rev, ModRev: rev, Lease: 100 + rev, Mono: keyAt * msNs},
		keyEvent{Put: false, Key: key, CreateRev: rev, ModRev: 1000 + rev, Lease: 100 + rev, Mono: gone * msNs})
	sortEvents(s.h.Keys)
	return id
}

func (s *synth) fault(kind string, node int, unit string, from, to int64) {
	s.h.Faults = append(s.h.Faults, faultEv{Kind: kind, Node: node, Peer: -1, Unit: unit, Detail: "injected", From: from * msNs, To: to * msNs})
}

func (s *synth) job(node int, unit string, from, to int64, code int, stderr string) {
	s.h.Jobs = append(s.h.Jobs, jobRec{Node: node, Unit: unit, Start: from * msNs, End: to * msNs, Code: code, Stderr: stderr})
}

// An extra child injected beside two clean holders of a --max 2 semaphore is reported, with
// a time line that marks the instant and names the injected child; without it the same
// history passes.
func TestNemesisCheckerFindsInjectedChild(t *testing.T) {
	build := func(inject bool) nemHistory {
		s := newSynth(nemPhase{Name: "x", Max: 2, TTL: 3 * time.Second})
		s.child(0, 100, 1000, 90, 1010, "done")
		s.child(1, 120, 1200, 95, 1210, "done")
		if inject { // a key ranked third, whose child starts anyway
			s.child(2, 500, 900, 98, 910, "done")
		}
		s.child(2, 1020, 1500, 99, 1510, "done")
		return s.h
	}
	if v := judge(build(false), false); v.failed() {
		t.Fatalf("clean history: violations %q", v.Violations)
	}
	v := judge(build(true), false)
	got := strings.Join(v.Violations, "\n")
	if !strings.Contains(got, "3+ children ran at once for 400ms") || !strings.Contains(got, "> ") ||
		!strings.Contains(got, "child start n3-12") {
		t.Errorf("injected third child: violations\n%s\nwant 3 at once for 400ms, with a time line naming n3-12", got)
	}
	if v.Report.MaxConcurrent != 3 {
		t.Errorf("largest concurrency %d, want 3", v.Report.MaxConcurrent)
	}
}

// --spread: two children at once on one node are a violation, even under the cluster's N.
func TestNemesisCheckerSpreadPerNode(t *testing.T) {
	s := newSynth(nemPhase{Name: "x", Max: 2, Spread: true, TTL: 3 * time.Second})
	s.child(0, 100, 1000, 90, 1010, "done")
	s.child(0, 600, 1500, 95, 1510, "done")
	v := judge(s.h, false)
	if !strings.Contains(strings.Join(v.Violations, "\n"), "2+ children ran at once on n1 for 400ms") || v.PerNodeMax != 2 {
		t.Errorf("two at once on n1: violations %q, per node %d; want the overlap on n1", v.Violations, v.PerNodeMax)
	}
}

// --once-per: a second successful run within the period is a violation when the first run's
// marker was in etcd, known (strict: a violation) when it was never written, and allowed when
// the first run's own node was faulted at its end; a failed run in between counts for nothing.
func TestNemesisCheckerOncePer(t *testing.T) {
	const marker = "/conch/v1/once/x/1"
	for _, tc := range []struct {
		name          string
		marked, fault bool
		strict        bool
		violation     string
		known         int
	}{
		{"marker written", true, false, false, "two successful runs in one period", 0},
		{"no marker, etcd at fault (closed: a violation even when not strict)", false, false, false, "once-per double run: marker not written", 0},
		{"no marker, strict", false, false, true, "once-per double run: marker not written", 0},
		{"no marker, writer's node lost power", false, true, true, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(nemPhase{Name: "x", Max: 1, OncePer: 3 * time.Second, TTL: 3 * time.Second})
			s.child(0, 100, 300, 90, 320, "done")
			s.child(1, 400, 500, 95, 510, "term") // a fenced run: no success
			s.child(2, 1300, 1500, 99, 1510, "done")
			if tc.marked {
				s.h.Marker = []keyEvent{{Put: true, Key: marker, CreateRev: 50, ModRev: 50, Mono: 310 * msNs}}
			}
			if tc.fault {
				s.fault(fPower, 0, "", 305, 2000)
			}
			v := judge(s.h, tc.strict)
			got := strings.Join(v.Violations, "\n")
			if tc.violation == "" && v.failed() || tc.violation != "" && !strings.Contains(got, tc.violation) {
				t.Errorf("violations %q, want %q", got, tc.violation)
			}
			if n := sum(v.Known); n != tc.known {
				t.Errorf("known %v, want %d", v.Known, tc.known)
			}
			if v.Successes != 2 {
				t.Errorf("%d successful runs, want 2", v.Successes)
			}
		})
	}
}

// A child that outlives its key is a violation, unless its node was frozen when the key went
// and it was gone by the thaw (D7b's window), and a child never seen to end on a node that
// lost power ended with its node.
func TestNemesisCheckerWindows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     func(*synth)
		end       int64
		violation string
	}{
		{"no fault", func(*synth) {}, 3000, "after etcd deleted its key"},
		{"frozen node, gone at the thaw", func(s *synth) { s.fault(fFreeze, 0, "", 500, 2990) }, 3000, ""},
		{"frozen node, gone long after the thaw", func(s *synth) { s.fault(fFreeze, 0, "", 500, 2990) }, 9000, "after etcd deleted its key"},
		{"frozen, another node", func(s *synth) { s.fault(fFreeze, 1, "", 500, 2990) }, 3000, "after etcd deleted its key"},
		{"end unseen, node lost power", func(s *synth) { s.fault(fPower, 0, "", 1500, 4000) }, 0, ""},
		{"end unseen, no power loss", func(*synth) {}, 0, "after etcd deleted its key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(nemPhase{Name: "x", Max: 2, TTL: 3 * time.Second})
			s.child(0, 100, tc.end, 90, 2000, "term")
			tc.fault(s)
			got := strings.Join(judge(s.h, false).Violations, "\n")
			if tc.violation == "" && got != "" || tc.violation != "" && !strings.Contains(got, tc.violation) {
				t.Errorf("violations %q, want %q", got, tc.violation)
			}
		})
	}
}

// Exit statuses outside the documented ones are violations unless the conch was SIGKILLed or
// its node lost power; a conch that exits 0 must have run the child of the slot it held; a
// lost place with no fault of the waiter's own is known (strict: a
// violation), with one that is its own conch's stop allowed; conch saying that etcd lost or
// rewound its state (D18), fenced or re-entering, is allowed after a member's data was wiped
// and a violation otherwise.
func TestNemesisCheckerExits(t *testing.T) {
	const lost = "conch: x[max=2]: lost our place in the queue (lease lost): re-entering at the back"
	const fenced = "conch: x[max=2]: slot held, rev=10 (fencing token)\nconch: x[max=2]: etcd lost or rewound its state while the child ran (lease lost: etcd lost or rewound its state: its revision went back from 90 to 40): child killed at once, without the --kill-after grace"
	const lostState = "conch: x[max=2]: lost our place in the queue (lease lost: etcd lost or rewound its state: it no longer knows lease 0000000000000abc, 2.1s before its deadline): re-entering at the back"
	const marker = "conch: x[max=2]: slot held, rev=10 (fencing token)\nconch: WARNING: the run succeeded, but this period's marker could not be written (deadline): the next run may start at once"
	for _, tc := range []struct {
		name      string
		code      int
		stderr    string
		fault     string // kind of a fault on the job's own conch
		strict    bool
		violation string
		known     int
	}{
		{"documented", 75, "", "", true, "", 0},
		{"ran its child", 0, "conch: x[max=2]: slot held, rev=10 (fencing token)", "", true, "", 0},
		{"exit 0, no child", 0, "conch: x[max=2]: slot held, rev=11 (fencing token)", "", true, "no child of its slot (rev 11) ran to its end", 0},
		{"exit 0, never held", 0, "", "", true, "never said it held a slot", 0},
		{"usage error", 64, "conch: bad flag", "", false, "exited 64, not a documented status", 0},
		{"killed conch", 255, "", fKillConch, true, "", 0},
		{"powered off, systemd-run says 0", 0, "Failed to query unit state: Connection reset by peer", fPower, true, "", 0},
		{"marker not written", 0, marker, "", false, "", 1},
		{"marker not written, strict", 0, marker, "", true, "once-per marker not written", 0},
		{"marker not written, its node cut", 0, marker, fCut, true, "", 0},
		{"lost place (closed: a violation even when not strict)", 75, lost, "", false, "waiter lost its place with no fault of its own", 0},
		{"lost place, strict", 75, lost, "", true, "waiter lost its place with no fault of its own", 0},
		{"lost place, its conch stopped", 75, lost, fStopWaiter, true, "", 0},
		{"lost place, its node cut from one member", 75, lost, fPair, true, "", 0},
		{"lost place, a pair partition of two other nodes", 75, lost, fPair + " elsewhere", true, "waiter lost its place with no fault of its own", 0},
		{"fenced for etcd's state, no wipe", 70, fenced, "", false, "said etcd lost or rewound its state, but no member's data was wiped", 0},
		{"fenced for etcd's state after a wipe", 70, fenced, fWipeEtcd, true, "", 0},
		{"re-entered for etcd's state, no wipe", 75, lostState, "", false, "said etcd lost or rewound its state, but no member's data was wiped", 0},
		{"re-entered for etcd's state after a wipe", 75, lostState, fWipeEtcd, true, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(nemPhase{Name: "x", Max: 2, TTL: 3 * time.Second})
			s.child(1, 200, 800, 150, 810, "done") // rev 10, on n2
			s.job(1, "conch-run-1-ab.service", 100, 900, tc.code, tc.stderr)
			switch tc.fault {
			case "":
			case fPair: // the job's node 1 is the pair's peer
				s.fault(fPair, 0, "", 200, 400)
				s.h.Faults[len(s.h.Faults)-1].Peer = 1
			case fPair + " elsewhere":
				s.fault(fPair, 0, "", 200, 400)
				s.h.Faults[len(s.h.Faults)-1].Peer = 2
			default:
				unit := "conch-run-1-ab.service"
				if tc.fault == fCut || tc.fault == fPower || tc.fault == fWipeEtcd { // node faults have no unit
					unit = ""
				}
				s.fault(tc.fault, 1, unit, 200, 400)
			}
			v := judge(s.h, tc.strict)
			got := strings.Join(v.Violations, "\n")
			if tc.violation == "" && got != "" || tc.violation != "" && !strings.Contains(got, tc.violation) {
				t.Errorf("violations %q, want %q", got, tc.violation)
			}
			if n := sum(v.Known); n != tc.known {
				t.Errorf("known %v, want %d", v.Known, tc.known)
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A slot free while a key waits is put down to the fault in force when it began, else to one
// that began during it, else to none.
func TestNemesisCheckerWorstHandoff(t *testing.T) {
	s := newSynth(nemPhase{Name: "x", Max: 1, TTL: 3 * time.Second})
	s.child(0, 100, 1000, 90, 1010, "done")
	s.child(1, 1100, 2000, 95, 2010, "done") // free 100 ms
	s.child(2, 6000, 7000, 99, 7010, "done") // free 4 s, from 2000 ms
	s.child(0, 7020, 8000, 98, 8010, "done") // free 20 ms
	s.fault(fCut, 2, "", 1500, 5000)
	s.fault(fKillConch, 1, "unit", 3000, 0)
	v := judge(s.h, false)
	// the 4 s span began before the kill: the cut's; the 20 ms one came less than a TTL and
	// a hand-off after the kill (and the cut's heal)
	want := map[string]time.Duration{"partition-both": 4 * time.Second, "none": 100 * time.Millisecond, fKillConch: 20 * time.Millisecond}
	for k, d := range want {
		if v.WorstFree[k] != d {
			t.Errorf("worst hand-off %v, want %s %v", v.WorstFree, k, d)
		}
	}
	if v.failed() {
		t.Errorf("violations %q, want none", v.Violations)
	}
}

// Hand-off and release are judged against their bounds (nemesis_bounds_test.go): a waiter
// that starts 4 s after the holder's key went, with no fault anywhere, is a too-slow hand-off,
// reported with its time line; the same start after a partition of the waiter's node healed
// 0.5 s after the deletion is within TTL + kill-after + one hand-off of the heal, and 8 s is
// not. A key deleted 3 s after its child ended, with no fault, is a too-slow release. The
// worst of each is kept per fault kind.
func TestNemesisCheckerFindsSlowHandoff(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		start, gone            int64 // the waiter's child's start, the holder's key's deletion (ms)
		fault                  bool
		violation              string
		worstHandoff, worstRel time.Duration
		kind                   string
	}{
		{"prompt", 1100, 1010, false, "", 90 * time.Millisecond, 10 * time.Millisecond, "none"},
		{"slow hand-off, no fault", 5000, 1010, false, "hand-off took 3.99s: etcd deleted sema/x/2/a at +1.01s (a slot free, sema/x/2/b waiting), child n2-11 started at +5s (bound 2s, no fault", 3990 * time.Millisecond, 10 * time.Millisecond, "none"},
		{"slow hand-off after a partition", 5000, 1010, true, "", 3990 * time.Millisecond, 10 * time.Millisecond, fCut},
		{"too slow even after a partition", 9000, 1010, true, "hand-off took 7.99s", 7990 * time.Millisecond, 10 * time.Millisecond, fCut},
		{"slow release, no fault", 4100, 4000, false, "release took 3s: child n1-10 on n1 ended at +1s, etcd deleted its key sema/x/2/a at +4s (bound 2s, no fault", 100 * time.Millisecond, 3 * time.Second, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(nemPhase{Name: "x", Max: 1, TTL: 3 * time.Second, KillAfter: time.Second})
			s.child(0, 100, 1000, 90, tc.gone, "done")
			s.child(1, tc.start, tc.start+500, 95, tc.start+510, "done")
			if tc.fault {
				s.fault(fCut, 1, "", 500, 1510)
			}
			v := judge(s.h, false)
			got := strings.Join(v.Violations, "\n")
			if tc.violation == "" && got != "" || tc.violation != "" && (!strings.Contains(got, tc.violation) || !strings.Contains(got, "> ")) {
				t.Errorf("violations\n%s\nwant %q with its time line", got, tc.violation)
			}
			if v.WorstHandoff[tc.kind] != tc.worstHandoff || v.WorstRelease["none"] != tc.worstRel && v.WorstRelease[tc.kind] != tc.worstRel {
				t.Errorf("worst hand-off %v, release %v; want %s %v and %v", v.WorstHandoff, v.WorstRelease, tc.kind, tc.worstHandoff, tc.worstRel)
			}
		})
	}
}
