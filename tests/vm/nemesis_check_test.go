package vm

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The nemesis's checker: it judges one semaphore's history under random faults (the children's
// own start and end stamps, etcd's watch history, every conch's exit, the faults applied) with
// check() for what every scenario holds (at most N at once, no child past its key, no start
// before etcd ranked the key, no key left), and adds what the fleet features and the faults
// need: at most one child per node with --spread, at most one successful run per --once-per
// period, every exit status a documented one, and the windows the rules allow under faults.
//
// Some outcomes are bugs that conch's current code still has (an etcd outage or stall at a
// run's end that leaves the --once-per marker unwritten; a waiter's place lost while none of
// its own processes, node or links was faulted): they are counted as "known" and printed, and
// become violations in strict mode (CONCH_NEMESIS_STRICT=1), for the code that fixes them.

// jobRec is one conch invocation of the workload, as the host saw it.
type jobRec struct {
	Node       int
	Unit       string
	Start, End int64  // when it was started, when its end was seen (CLOCK_MONOTONIC ns)
	Code       int    // its exit status (systemd-run passes conch's on)
	NoStatus   string // why there is no exit status (its node lost power, ...); "" if there is one
	Stderr     string
}

// nemPhase is what one semaphore of the run is.
type nemPhase struct {
	Name      string
	Max       int
	Spread    bool
	OncePer   time.Duration // 0: none
	TTL       time.Duration
	KillAfter time.Duration // the jobs' --kill-after
}

func (p nemPhase) String() string {
	s := fmt.Sprintf("%s[max=%d]", p.Name, p.Max)
	if p.Spread {
		s += " --spread"
	}
	if p.OncePer > 0 {
		s += " --once-per " + p.OncePer.String()
	}
	return s
}

// nemHistory is everything the checker judges for one semaphore.
type nemHistory struct {
	Phase    nemPhase
	Nodes    []string // machine names, by node index
	Children []childRec
	Keys     []keyEvent // the semaphore's prefix, in revision order
	Marker   []keyEvent // its --once-per marker
	Jobs     []jobRec
	Faults   []faultEv
	Base     int64 // the run's first instant: times are told from it
	Now      int64
}

// Bounds of the windows the rules allow, from the timers (never measured figures).
const (
	// thawBound: a child frozen with its node past its lease is SIGKILLed at the thaw, with no
	// grace (D7b (1)); measured 2-7 ms (tests/vm scenario 4); a loaded machine must run the
	// thawed conch or guardian first.
	thawBound = 3 * time.Second
	// startSlop: a child may start this much before the host's watch saw etcd rank its key:
	// the waiter's watch and the host's are two streams, and the host's may sit on a member a
	// fault just took.
	startSlop = 2 * time.Second
	// onceSlop: how much shorter than the period the gap between two successful runs may
	// look: the marker's lease is granted after the run's end, so none.
	onceSlop = 0
	// wipeAfter: how long after a member was replaced conch may still learn of it (a D18
	// fence needs a keep-alive answered by a member; a waiter's cadence is TTL/6).
	wipeAfter = 10 * time.Second
	// lineBefore, lineAfter: a violation's time line shows the events this long before and after it.
	lineBefore, lineAfter = 4 * time.Second, 2 * time.Second
)

// documentedExits are the statuses conch may end with in this workload (D3): the child's own
// (histchild exits 0), 69 (etcd unreachable when --dial-timeout or --wait ran out), 70 (slot
// lost while the child ran), 75 (no slot within --wait).
var documentedExits = []int{0, 69, 70, 75}

// verdict is the checker's judgement of one semaphore.
type verdict struct {
	Report     report
	PerNodeMax int // --spread: the most children at once on one node
	Successes  int // --once-per: successful runs
	Exits      map[string]int
	ExitEx     map[string]string // an example of each status but 0: the conch, with its stderr
	Violations []string          // each with its time line
	Known      map[string]int
	KnownEx    map[string]string // one example of each known outcome, with its time line
	Excused    map[string]int    // outcomes inside a window the rules allow
	WorstFree  map[string]time.Duration
	// WorstHandoff and WorstRelease are the longest hand-off (a key's deletion that freed a
	// slot to the next take of a key that waited) and release (a child's end to its key's
	// deletion) by fault kind in force ("none": no fault), as nemesis_bounds_test.go measures
	// and judges them.
	WorstHandoff, WorstRelease map[string]time.Duration
}

func (v verdict) failed() bool { return len(v.Violations) > 0 }

// The known outcomes that conch's fixes have closed: violations even when the run is not
// strict. A --once-per double run after an etcd fault at the run's end (the marker is retried
// within the lease, D15b) and a waiter's place lost with no fault of its own (promotion
// confirmed on etcd's word, D7i; an enqueue's lost answer, D7j; a lone member's stall, D7h)
// were 0 on CI's seeds 1, 2 and 3 with CONCH_NEMESIS_STRICT=1. A marker not written while
// conch warned stays known: an outage longer than the lease truly prevents it.
const (
	knownDoubleRun = "once-per double run: marker not written after an etcd fault at the run's end"
	knownLostPlace = "waiter lost its place with no fault of its own"
)

var strictKnown = map[string]bool{knownDoubleRun: true, knownLostPlace: true}

// judge judges h; strict makes every known outcome a violation (those of strictKnown always are).
func judge(h nemHistory, strict bool) verdict {
	v := verdict{Exits: map[string]int{}, ExitEx: map[string]string{}, Known: map[string]int{}, KnownEx: map[string]string{}, Excused: map[string]int{}, WorstFree: map[string]time.Duration{},
		WorstHandoff: map[string]time.Duration{}, WorstRelease: map[string]time.Duration{}}
	chs := h.windows(&v)
	spec := checkSpec{Max: h.Phase.Max, Handoff: 1 << 62, Slop: startSlop}
	v.Report = check(chs, h.Keys, spec, h.Now)
	for k, msg := range v.Report.Violations {
		v.violate(h, v.Report.At[k], msg)
	}
	known := func(what string, at int64, msg string) {
		if strict || strictKnown[what] {
			v.violate(h, at, what+": "+msg)
			return
		}
		v.Known[what]++
		if _, ok := v.KnownEx[what]; !ok {
			v.KnownEx[what] = msg + "\n" + h.timeline(at)
		}
	}
	if h.Phase.Spread {
		h.perNode(&v, chs)
	}
	if h.Phase.OncePer > 0 {
		h.oncePer(&v, chs, known)
	}
	h.exits(&v, known)
	h.free(&v)
	h.bounds(&v, chs)
	return v
}

// violate records a violation at instant at, with its time line.
func (v *verdict) violate(h nemHistory, at int64, msg string) {
	v.Violations = append(v.Violations, fmt.Sprintf("at +%v: %s\n%s", h.rel(at), msg, h.timeline(at)))
}

func (h nemHistory) rel(at int64) time.Duration { return ms(time.Duration(at - h.Base)) }

// windows returns the children as check() must judge them, within the windows the rules
// allow: a child whose node was frozen when its key went (a paused VM past its lease: D7b's
// documented window, capacity N+1 until the thaw) counts as ended at its key's deletion if it
// was gone within thawBound of the thaw; a child whose end nobody saw (SIGKILLed with its node
// before the host's pidfd was open) ended at its node's power loss at the latest.
func (h nemHistory) windows(v *verdict) []childRec {
	deleted := map[int64]int64{}
	for _, k := range replay(h.Keys, h.Phase.Max) {
		deleted[k.createRev] = k.deleted
	}
	var out []childRec
	for _, c := range h.Children {
		node := slices.Index(h.Nodes, c.Node)
		if c.until() == 1<<63-1 {
			for _, f := range h.Faults {
				if f.Kind == fPower && f.Node == node && f.From > c.Start {
					c.Gone = f.From
					v.Excused["end unseen, bounded by its node's power loss"]++
					break
				}
			}
		}
		if d, ok := deleted[c.rev()]; ok && c.until() > d {
			for _, f := range h.Faults {
				if f.Kind == fFreeze && f.Node == node && f.From <= d && d <= f.To+int64(thawBound) && c.until() <= f.To+int64(thawBound) {
					v.Excused[fmt.Sprintf("ran past its key while its node was frozen, gone by the thaw + %v (D7b)", thawBound)]++
					// counted until its key's deletion, as the host's watch saw it: that watch may
					// see it up to startSlop after the waiter it woke, whose child then starts
					// before d: an overlap that never was
					c.End, c.Gone = max(c.Start, d-int64(startSlop)), 0
					break
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// perNode judges --spread: at most one child at once on each node.
func (h nemHistory) perNode(v *verdict, chs []childRec) {
	byNode := map[string][]childRec{}
	for _, c := range chs {
		byNode[c.Node] = append(byNode[c.Node], c)
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		var pts []point
		for _, c := range byNode[node] {
			pts = append(pts, point{c.Start, 1, 0}, point{min(c.until(), h.Now), -1, 0})
		}
		slices.SortFunc(pts, func(a, b point) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.dRun, b.dRun)) })
		running := 0
		var over *span
		var overs []span
		for i, p := range pts {
			running += p.dRun
			v.PerNodeMax = max(v.PerNodeMax, running)
			if i+1 < len(pts) && pts[i+1].at == p.at {
				continue
			}
			over = track(&overs, over, running > 1, p.at)
		}
		for _, s := range overs {
			v.violate(h, s.From, fmt.Sprintf("2+ children ran at once on %s for %v (--spread: at most 1 per node)", node, ms(s.dur())))
		}
	}
}

// oncePer judges --once-per: two successful runs (the child exited 0 by itself) closer than
// the period are one period's job run twice. That is a violation when the first run's marker
// was in etcd before the second started; without a marker it is allowed when the first run's
// writer was itself cut off, frozen, stopped or killed at its end (the marker truly could not
// be written), and known otherwise (an etcd outage or stall at the run's end: the marker's
// write is not retried).
func (h nemHistory) oncePer(v *verdict, chs []childRec, known func(string, int64, string)) {
	var ok []childRec
	for _, c := range chs {
		if c.How == "done" {
			ok = append(ok, c)
		}
	}
	slices.SortFunc(ok, func(a, b childRec) int { return cmp.Compare(a.Start, b.Start) })
	v.Successes = len(ok)
	for k := 1; k < len(ok); k++ {
		a, b := ok[k-1], ok[k]
		gap := time.Duration(b.Start - a.until())
		if gap >= h.Phase.OncePer-onceSlop {
			continue
		}
		msg := fmt.Sprintf("two successful runs in one period: %s ended at +%v, %s started %v later (--once-per %v)",
			a.ID, h.rel(a.until()), b.ID, ms(gap), h.Phase.OncePer)
		marked := slices.ContainsFunc(h.Marker, func(e keyEvent) bool { return e.Put && e.Mono >= a.until() && e.Mono <= b.Start })
		switch {
		case marked:
			v.violate(h, b.Start, msg+"; the first run's marker was in etcd")
		case h.writerHit(a):
			v.Excused["no marker: the run's own node or conch was faulted at its end"]++
		default:
			known(knownDoubleRun, b.Start, msg)
		}
	}
}

// writerHit reports whether a fault hit run c's own node (power, freeze, partition of it) or a
// conch on it, from just before its end to a TTL after.
func (h nemHistory) writerHit(c childRec) bool {
	node := slices.Index(h.Nodes, c.Node)
	from, to := c.until()-int64(time.Second), c.until()+int64(h.Phase.TTL)
	for _, f := range h.Faults {
		if f.From > to || f.end() < from {
			continue
		}
		switch f.Kind {
		case fPower, fFreeze, fCut, fOneWay, fStopHolder, fStopWaiter, fStopGuardian, fKillConch:
			if f.Node == node {
				return true
			}
		}
	}
	return false
}

// exits judges every conch's exit status, and counts the waiters that lost their place and the
// runs whose --once-per marker could not be written (conch warns).
func (h nemHistory) exits(v *verdict, known func(string, int64, string)) {
	for _, j := range h.Jobs {
		status := strconv.Itoa(j.Code)
		if j.NoStatus != "" {
			status = "none"
		}
		v.Exits[status]++
		if _, ok := v.ExitEx[status]; !ok && status != "0" {
			v.ExitEx[status] = fmt.Sprintf("conch %s on %s, from +%v to +%v:\n%s", j.Unit, h.Nodes[j.Node], h.rel(j.Start), h.rel(j.End), indent(j.Stderr))
		}
		// A conch SIGKILLed ends as systemd-run says (255); one whose node lost power has no
		// status of its own: systemd-run, in the host's cgroup, loses the node's bus and exits
		// 1, or even 0 ("Failed to query unit state: Connection reset by peer").
		if h.jobHit(j, fKillConch, fPower) {
			v.Excused["status of a conch SIGKILLed or powered off"]++
			continue
		}
		if j.NoStatus != "" || !slices.Contains(documentedExits, j.Code) {
			v.violate(h, j.End, fmt.Sprintf("conch %s on %s exited %s%s, not a documented status; stderr:\n%s",
				j.Unit, h.Nodes[j.Node], status, errNote(j.NoStatus), indent(j.Stderr)))
		}
		stateLost := strings.Contains(j.Stderr, stateLostLine)
		if stateLost && h.wipeNear(j) {
			v.Excused["etcd's state said lost or rewound after a member's data was wiped (D18: fenced at once, or re-entered)"]++
		} else if stateLost {
			v.violate(h, j.End, fmt.Sprintf("conch %s on %s said etcd lost or rewound its state, but no member's data was wiped; stderr:\n%s",
				j.Unit, h.Nodes[j.Node], indent(j.Stderr)))
		}
		if j.NoStatus == "" && j.Code == 0 && !strings.Contains(j.Stderr, "skipped: ") {
			h.ranItsChild(v, j)
		}
		if strings.Contains(j.Stderr, "marker could not be written") {
			if h.jobHit(j, fPower, fFreeze, fCut, fOneWay, fStopHolder, fStopWaiter, fStopGuardian) {
				v.Excused["a run's marker not written while its own node, links or conch were faulted (conch warned)"]++
			} else {
				known("once-per marker not written after an etcd fault at the run's end (conch warned)", h.firstFault(j),
					fmt.Sprintf("conch %s on %s, from +%v to +%v:\n%s", j.Unit, h.Nodes[j.Node], h.rel(j.Start), h.rel(j.End), indent(j.Stderr)))
			}
		}
		if n := strings.Count(j.Stderr, "lost our place in the queue"); n > 0 {
			// A pair partition cuts the waiter's node from one member: when that member is
			// the one its client talks to, the keep-alives go unanswered until gRPC gives up
			// on the connection (up to 13 s, past a short TTL); its own links' fault.
			if h.jobHit(j, fPower, fFreeze, fCut, fOneWay, fPair, fStopHolder, fStopWaiter, fStopGuardian, fKillConch) || h.leaderStalled(j) || stateLost {
				v.Excused["a waiter's place lost while its own node, links or conch were faulted, or etcd's leader stalled"] += n
				continue
			}
			known(knownLostPlace, h.firstFault(j),
				fmt.Sprintf("conch %s on %s lost its place %d times, from +%v to +%v:\n%s", j.Unit, h.Nodes[j.Node], n, h.rel(j.Start), h.rel(j.End), indent(j.Stderr)))
		}
	}
}

var heldRev = regexp.MustCompile(`slot held, rev=([0-9]+)`)

// ranItsChild holds a conch that exited 0 without a skip to its word (D3: the child's own
// status): the child of the last slot it said it held (-v) started and ended by itself.
func (h nemHistory) ranItsChild(v *verdict, j jobRec) {
	m := heldRev.FindAllStringSubmatch(j.Stderr, -1)
	if len(m) == 0 {
		v.violate(h, j.End, fmt.Sprintf("conch %s on %s exited 0 but never said it held a slot; stderr:\n%s", j.Unit, h.Nodes[j.Node], indent(j.Stderr)))
		return
	}
	rev := m[len(m)-1][1]
	for _, c := range h.Children {
		if c.Rev == rev && c.Node == h.Nodes[j.Node] && c.How == "done" {
			return
		}
	}
	v.violate(h, j.End, fmt.Sprintf("conch %s on %s exited 0, but no child of its slot (rev %s) ran to its end; stderr:\n%s",
		j.Unit, h.Nodes[j.Node], rev, indent(j.Stderr)))
}

// jobHit reports whether a fault of one of kinds hit job j during its life: its node (either
// side of a pair partition), or its own conch (by unit).
func (h nemHistory) jobHit(j jobRec, kinds ...string) bool {
	for _, f := range h.Faults {
		if !slices.Contains(kinds, f.Kind) || f.From > j.End || f.end() < j.Start {
			continue
		}
		if f.Unit != "" && f.Unit == j.Unit || f.Unit == "" && (f.Node == j.Node || f.Peer == j.Node) {
			return true
		}
	}
	return false
}

// firstFault returns the instant of the first fault during job j's life, where its time line
// is most telling (conch's lines carry no time), else the job's start.
func (h nemHistory) firstFault(j jobRec) int64 {
	for _, f := range h.Faults { // by start
		if f.From >= j.Start && f.From <= j.End {
			return f.From
		}
	}
	return j.Start
}

// stateLostLine is what conch says, holder (exit 70) or waiter (a lost place), when etcd
// lost or rewound its state (D18).
const stateLostLine = "etcd lost or rewound its state"

// wipeNear reports whether a member's data was wiped during job j's life or less than
// wipeAfter before it: only then may conch say that etcd lost or rewound its state.
func (h nemHistory) wipeNear(j jobRec) bool {
	return slices.ContainsFunc(h.Faults, func(f faultEv) bool {
		return f.Kind == fWipeEtcd && f.From <= j.End && f.end()+int64(wipeAfter) >= j.Start
	})
}

// leaderStalled reports whether etcd's leader was stalled during job j's life: a stopped
// leader that is not replaced expires every lease at its thaw, which conch cannot prevent.
func (h nemHistory) leaderStalled(j jobRec) bool {
	return slices.ContainsFunc(h.Faults, func(f faultEv) bool {
		return f.Kind == fStallEtcd && strings.HasPrefix(f.Detail, "leader") && f.From <= j.End && f.end() >= j.Start
	})
}

// free attributes every span in which a slot was free while a key waited (check's Free) to
// the faults in force when it began (or healed less than a TTL and a hand-off before), else
// to those that began during it, else to "none", and keeps the worst per fault kind.
func (h nemHistory) free(v *verdict) {
	window := int64(h.Phase.TTL + handoff)
	for _, s := range v.Report.Free {
		var before, during []string
		for _, f := range h.Faults {
			switch {
			case f.From <= s.From && f.end()+window >= s.From:
				before = append(before, f.Kind)
			case f.From > s.From && f.From <= s.To:
				during = append(during, f.Kind)
			}
		}
		kinds := before
		if len(kinds) == 0 {
			kinds = during
		}
		if len(kinds) == 0 {
			kinds = []string{"none"}
		}
		for _, k := range kinds {
			v.WorstFree[k] = max(v.WorstFree[k], ms(s.dur()))
		}
	}
}

// timeline tells the events of the history from lineBefore before at to lineAfter after it.
func (h nemHistory) timeline(at int64) string {
	type ev struct {
		at   int64
		what string
	}
	var evs []ev
	add := func(t int64, format string, args ...any) {
		if t >= at-int64(lineBefore) && t <= at+int64(lineAfter) {
			evs = append(evs, ev{t, fmt.Sprintf(format, args...)})
		}
	}
	for _, f := range h.Faults {
		add(f.From, "fault %s: %s%s", f.Kind, f.Detail, errNote(f.Err))
		if f.To > 0 {
			add(f.To, "healed %s: %s", f.Kind, f.Detail)
		}
	}
	for _, c := range h.Children {
		add(c.Start, "child start %s (rev %s)", c.ID, c.Rev)
		if c.End > 0 {
			add(c.End, "child end %s (%s)", c.ID, c.How)
		} else if c.Gone > 0 {
			add(c.Gone, "child gone %s (seen through its pidfd)", c.ID)
		}
	}
	for _, e := range append(slices.Clone(h.Keys), h.Marker...) {
		what := "delete"
		if e.Put {
			what = "put"
		}
		add(e.Mono, "etcd %s %s (created rev %d, lease %x)", what, shortKey(e.Key), e.CreateRev, e.Lease)
	}
	for _, j := range h.Jobs {
		add(j.Start, "conch %s on %s started", j.Unit, h.Nodes[j.Node])
		add(j.End, "conch %s on %s exited %d%s", j.Unit, h.Nodes[j.Node], j.Code, errNote(j.NoStatus))
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return cmp.Compare(a.at, b.at) })
	const most = 40
	if len(evs) > most { // keep those nearest the instant
		i, _ := slices.BinarySearchFunc(evs, at, func(e ev, t int64) int { return cmp.Compare(e.at, t) })
		lo := max(0, min(i-most*2/3, len(evs)-most))
		evs = evs[lo : lo+most]
	}
	var b strings.Builder
	marked := false
	for _, e := range evs {
		mark := " "
		if e.at >= at && !marked { // the violation's instant
			mark, marked = ">", true
		}
		fmt.Fprintf(&b, "    %s %+9v  %s\n", mark, h.rel(e.at), e.what)
	}
	return strings.TrimRight(b.String(), "\n")
}

func errNote(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// shortKey drops the common prefix of conch's keys.
func shortKey(k string) string { return strings.TrimPrefix(k, "/conch/v1/") }

func indent(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// summary is the verdict in a few lines, for the run's log.
func (v verdict) summary(p nemPhase, jobs int) string {
	var b strings.Builder
	r := v.Report
	fmt.Fprintf(&b, "%v: %d conch runs, %d children, at most %d at once", p, jobs, r.Children, r.MaxConcurrent)
	if p.Spread {
		fmt.Fprintf(&b, " (at most %d on one node)", v.PerNodeMax)
	}
	if p.OncePer > 0 {
		fmt.Fprintf(&b, ", %d successful runs", v.Successes)
	}
	if len(r.Handoffs) > 0 {
		s := slices.Sorted(slices.Values(r.Handoffs))
		fmt.Fprintf(&b, "; hand-off median %v max %v (%d)", s[len(s)/2], s[len(s)-1], len(s))
	}
	fmt.Fprintf(&b, "\n  exit statuses %v", countList(v.Exits))
	fmt.Fprintf(&b, "\n  worst hand-off (a key's deletion to the next start) by fault kind: %v", durList(v.WorstHandoff))
	fmt.Fprintf(&b, "\n  worst release (a child's end to its key's deletion) by fault kind: %v", durList(v.WorstRelease))
	fmt.Fprintf(&b, "\n  worst span with a slot free while a key waited, by fault kind in force: %v", durList(v.WorstFree))
	if len(r.RanPastKey) > 0 {
		fmt.Fprintf(&b, "\n  children past their key (judged) %v", r.RanPastKey)
	}
	fmt.Fprintf(&b, "\n  allowed by the rules: %v", countList(v.Excused))
	fmt.Fprintf(&b, "\n  known (strict with CONCH_NEMESIS_STRICT=1): %v", countList(v.Known))
	fmt.Fprintf(&b, "\n  violations: %d", len(v.Violations))
	return b.String()
}

func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func durList(m map[string]time.Duration) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
