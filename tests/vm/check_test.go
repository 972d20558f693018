package vm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// checkSpec says what one semaphore's history must satisfy.
type checkSpec struct {
	Max int
	// Handoff is the longest a slot may stay free while a waiter waits: one hand-off (release,
	// watch event, scope, exec) with a margin for a loaded machine, or more where a scenario's
	// fault makes a longer gap legitimate (a crashed holder's slot frees only at lease expiry).
	Handoff time.Duration
	// Overlap is the longest N+1 overlap tolerated, and the longest a child may run on after
	// etcd deleted its key. 0 (no overlap at all) is D7's promise for a holder cut off from etcd;
	// the spec's "Failure behavior" window is measured where a scenario allows it (a stall).
	Overlap time.Duration
	// Slop is how much earlier than the host saw etcd rank its key among the first Max a child
	// may start: the host's watch and the waiter's watch are two streams.
	Slop time.Duration
	// Settled, when not 0, is the CLOCK_MONOTONIC instant from which idle slots are judged:
	// a scenario that starts hundreds of jobs at once measures the machine's process starts
	// before it, not a hand-off. Idle time before it is not counted.
	Settled int64
	// Leaderless are spans (CLOCK_MONOTONIC ns) in which a scenario's fault left etcd without
	// a leader, as the scenario measured them (leaderLoss): no write commits then (a release's
	// revoke, an enqueue, a promotion), so a free slot cannot be handed on. Idle time inside
	// them is not counted against Handoff: an idle span is judged on what is left of it.
	// Overlaps are judged in full, inside them too.
	Leaderless []span
}

// span is an interval of the history, in CLOCK_MONOTONIC nanoseconds.
type span struct{ From, To int64 }

func (s span) dur() time.Duration { return time.Duration(s.To - s.From) }

// report is the checker's verdict on one semaphore.
type report struct {
	Children      int
	MaxConcurrent int
	Overlaps      []span          // more than Max children at once
	Idle          []span          // a slot free while someone waited, longer than Handoff
	Handoffs      []time.Duration // from the end that freed a slot to the start of a waiting child
	CrossNode     int             // hand-offs from a child on one node to a child on another
	RanPastKey    []time.Duration // how long children ran after etcd deleted their key (>0 only)
	Leaderless    []span          // spec.Leaderless: idle time in them was not counted
	// Free are all the spans in which a slot was free while someone waited, however short
	// (Idle keeps those judged too long): the nemesis attributes them to its faults.
	Free       []span
	Violations []string
	// At is when each of Violations happened (CLOCK_MONOTONIC ns), index for index: the
	// nemesis prints the history around it.
	At   []int64
	Base int64 // the history's first instant (CLOCK_MONOTONIC ns): spans are told from it
}

// violate records a violation that happened at the CLOCK_MONOTONIC instant at.
func (r *report) violate(at int64, msg string) {
	r.Violations = append(r.Violations, msg)
	r.At = append(r.At, at)
}

// failed reports whether the history breaks the promise.
func (r report) failed() bool { return len(r.Violations) > 0 }

// String is the report in one paragraph, with the figures the scenarios print.
func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d children, at most %d at once; ", r.Children, r.MaxConcurrent)
	fmt.Fprintf(&b, "overlaps %s; idle slots with waiters %s; ", spans(r.Overlaps), spans(r.Idle))
	if len(r.Handoffs) > 0 {
		s := slices.Sorted(slices.Values(r.Handoffs))
		fmt.Fprintf(&b, "hand-off median %v max %v (%d, %d across nodes); ", ms(s[len(s)/2]), ms(s[len(s)-1]), len(s), r.CrossNode)
	}
	if len(r.RanPastKey) > 0 {
		fmt.Fprintf(&b, "ran past their key %v; ", r.RanPastKey)
	}
	for _, l := range r.Leaderless {
		fmt.Fprintf(&b, "etcd leaderless (idle not counted) %v from +%v; ", ms(l.dur()), ms(time.Duration(l.From-r.Base)))
	}
	fmt.Fprintf(&b, "%d violations", len(r.Violations))
	for _, v := range r.Violations {
		b.WriteString("\n  - " + v)
	}
	return b.String()
}

func spans(ss []span) string {
	if len(ss) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range ss {
		parts = append(parts, ms(s.dur()).String())
	}
	return strings.Join(parts, ",")
}

// ms rounds d to milliseconds.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// point is a change of the running or waiting count at a time.
type point struct {
	at             int64
	dRun, dWaiting int
}

// check judges one semaphore's history: the children's records (chs, all of this semaphore)
// and etcd's watch history of its prefix (evs, in revision order), up to now.
func check(chs []childRec, evs []keyEvent, spec checkSpec, now int64) report {
	r := report{Children: len(chs), Leaderless: spec.Leaderless}
	keys := replay(evs, spec.Max)
	var pts []point
	for _, c := range chs {
		pts = append(pts, point{c.Start, 1, 0}, point{min(c.until(), now), -1, 0})
	}
	byRev := map[int64]childRec{}
	for _, c := range chs {
		byRev[c.rev()] = c
	}
	for _, k := range keys {
		end := min(k.deleted, now)
		if c, ok := byRev[k.createRev]; ok {
			end = min(end, c.Start)
		}
		if end > k.created {
			pts = append(pts, point{k.created, 0, 1}, point{end, 0, -1})
		}
	}
	// At one instant, ends come before starts: a child that starts as another ends is a
	// hand-off, not an overlap.
	slices.SortFunc(pts, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.dRun+a.dWaiting, b.dRun+b.dWaiting))
	})
	if len(pts) > 0 {
		r.Base = slices.MinFunc(pts, func(a, b point) int { return cmp.Compare(a.at, b.at) }).at
	}
	r.sweep(pts, spec)
	for i, sp := range r.Idle {
		r.Violations[len(r.Overlaps)+i] += "\n    " + r.around(sp, chs, keys, spec.Max)
	}
	r.checkKeys(chs, keys, spec, now)
	r.handoffs(chs, keys)
	return r
}

// sweep walks the counts: more than Max running is an overlap, fewer than Max running while
// someone waits is an idle slot.
func (r *report) sweep(pts []point, spec checkSpec) {
	running, waiting := 0, 0
	var over, idle *span
	for i, p := range pts {
		running += p.dRun
		waiting += p.dWaiting
		r.MaxConcurrent = max(r.MaxConcurrent, running)
		if i+1 < len(pts) && pts[i+1].at == p.at {
			continue // judge the state between instants only
		}
		over = track(&r.Overlaps, over, running > spec.Max, p.at)
		idle = track(&r.Idle, idle, running < spec.Max && waiting > 0, p.at)
	}
	r.Overlaps = longer(r.Overlaps, spec.Overlap)
	for _, s := range r.Overlaps {
		r.violate(s.From, fmt.Sprintf("%d+ children ran at once for %v (tolerated: %v)", spec.Max+1, ms(s.dur()), spec.Overlap))
	}
	r.Free = r.Idle
	r.Idle = settled(r.Idle, spec.Settled)
	var judged []span
	for _, s := range r.Idle {
		off := overlap(s, spec.Leaderless)
		if s.dur()-off <= spec.Handoff {
			continue
		}
		judged = append(judged, s)
		msg := fmt.Sprintf("a slot stayed free for %v while someone waited, from +%v (one hand-off: %v)", ms(s.dur()), ms(time.Duration(s.From-r.Base)), spec.Handoff)
		if off > 0 {
			msg += fmt.Sprintf("; %v of it with etcd leaderless, not counted", ms(off))
		}
		r.violate(s.From, msg)
	}
	r.Idle = judged
}

// overlap returns how much of s lies inside the spans ls (each instant counted once, however
// many of ls hold it).
func overlap(s span, ls []span) time.Duration {
	ls = slices.SortedFunc(slices.Values(ls), func(a, b span) int { return cmp.Compare(a.From, b.From) })
	var d time.Duration
	at := s.From // the instants before at are counted already
	for _, l := range ls {
		from, to := max(l.From, at), min(l.To, s.To)
		if to > from {
			d += time.Duration(to - from)
			at = to
		}
	}
	return d
}

// around describes the first max+2 keys alive when span sp began (by create revision): when
// etcd ranked each among the first Max, when its child started and ended, when the key went;
// times are from r.Base. It tells a late child start from a late release or a late promotion.
func (r *report) around(sp span, chs []childRec, keys []*keyLife, maxHolders int) string {
	at := func(t int64) string {
		switch {
		case t == 0:
			return "-"
		case t == 1<<63-1:
			return "never"
		}
		return "+" + ms(time.Duration(t-r.Base)).String()
	}
	byRev := map[int64]childRec{}
	for _, c := range chs {
		byRev[c.rev()] = c
	}
	var parts []string
	for _, k := range keys {
		if k.created > sp.From || k.deleted <= sp.From {
			continue
		}
		c, ok := byRev[k.createRev]
		start, end := int64(0), int64(0)
		if ok {
			start, end = c.Start, c.until()
		}
		parts = append(parts, fmt.Sprintf("rev %d: ranked %s, child %s..%s, key gone %s", k.createRev, at(k.held), at(start), at(end), at(k.deleted)))
		if len(parts) == maxHolders+2 {
			break
		}
	}
	return "keys then: " + strings.Join(parts, "; ")
}

// track opens a span at when cond starts holding and closes it (appending it to out) when it
// stops; it returns the open span.
func track(out *[]span, open *span, cond bool, at int64) *span {
	switch {
	case cond && open == nil:
		return &span{From: at}
	case !cond && open != nil:
		open.To = at
		*out = append(*out, *open)
		return nil
	}
	return open
}

// settled returns the parts of spans ss from the instant from on (all of them when from is 0).
func settled(ss []span, from int64) []span {
	var out []span
	for _, s := range ss {
		if s.To > from {
			s.From = max(s.From, from)
			out = append(out, s)
		}
	}
	return out
}

// longer keeps the spans longer than d.
func longer(ss []span, d time.Duration) []span {
	var out []span
	for _, s := range ss {
		if s.dur() > d {
			out = append(out, s)
		}
	}
	return out
}

// keyLife is one key of the semaphore in etcd's history.
type keyLife struct {
	key       string
	createRev int64
	lease     int64
	created   int64 // when the host saw its creation
	held      int64 // when the host first saw it among the first Max by create revision (0: never)
	deleted   int64 // when the host saw its deletion (MaxInt64: not deleted)
}

// replay runs etcd's history and returns each key's life, by creation.
func replay(evs []keyEvent, maxHolders int) []*keyLife {
	var all []*keyLife
	live := map[string]*keyLife{}
	for _, e := range evs {
		k := live[e.Key]
		switch {
		case e.Put && k == nil:
			k = &keyLife{key: e.Key, createRev: e.CreateRev, lease: e.Lease, created: e.Mono, deleted: 1<<63 - 1}
			live[e.Key] = k
			all = append(all, k)
		case !e.Put && k != nil:
			k.deleted = e.Mono
			delete(live, e.Key)
		}
		ranked := slices.SortedFunc(func(yield func(*keyLife) bool) {
			for _, k := range live {
				if !yield(k) {
					return
				}
			}
		}, func(a, b *keyLife) int { return cmp.Compare(a.createRev, b.createRev) })
		for i, k := range ranked {
			if i < maxHolders && k.held == 0 {
				k.held = e.Mono
			}
		}
	}
	return all
}

// checkKeys holds every child to etcd's history: its CONCH_REV and CONCH_LEASE name a key that
// existed, it started only once etcd ranked that key among the first Max, and it was gone
// before etcd deleted the key (D7: fenced before anyone else can have the slot). A key left at
// the end of the history is a violation too.
func (r *report) checkKeys(chs []childRec, keys []*keyLife, spec checkSpec, now int64) {
	byRev := map[int64]*keyLife{}
	for _, k := range keys {
		byRev[k.createRev] = k
		if k.deleted > now {
			r.violate(k.created, "key "+k.key+" is still in etcd")
		}
	}
	for _, c := range chs {
		k := byRev[c.rev()]
		if k == nil {
			r.violate(c.Start, fmt.Sprintf("child %s: CONCH_REV %s is no key in etcd's history", c.ID, c.Rev))
			continue
		}
		if lease, err := strconv.ParseInt(c.Lease, 16, 64); err != nil || lease != k.lease {
			r.violate(c.Start, fmt.Sprintf("child %s: CONCH_LEASE %s, but its key has lease %x", c.ID, c.Lease, k.lease))
		}
		if k.held == 0 || c.Start < k.held-int64(spec.Slop) {
			r.violate(c.Start, fmt.Sprintf("child %s started before etcd ranked its key %s among the first %d", c.ID, k.key, spec.Max))
		}
		if past := time.Duration(min(c.until(), now) - k.deleted); past > 0 {
			r.RanPastKey = append(r.RanPastKey, ms(past))
			if past > spec.Overlap {
				r.violate(k.deleted, fmt.Sprintf("child %s on %s ran %v after etcd deleted its key (tolerated: %v)", c.ID, c.Node, ms(past), spec.Overlap))
			}
		}
	}
}

// handoffs measures, for each child whose key was waiting when a slot freed, the time from
// that end to its start.
func (r *report) handoffs(chs []childRec, keys []*keyLife) {
	created := map[int64]int64{}
	for _, k := range keys {
		created[k.createRev] = k.created
	}
	for _, c := range chs {
		var freed *childRec
		for i := range chs {
			o := &chs[i]
			if o.ID != c.ID && o.until() <= c.Start && (freed == nil || o.until() > freed.until()) {
				freed = o
			}
		}
		cr, ok := created[c.rev()]
		if freed == nil || !ok || cr > freed.until() || freed.until() < c.Start-int64(10*time.Second) {
			continue
		}
		r.Handoffs = append(r.Handoffs, ms(time.Duration(c.Start-freed.until())))
		if freed.Node != c.Node {
			r.CrossNode++
		}
	}
}

// sortEvents orders watch events by revision (a Txn's events share one: keys break the tie).
func sortEvents(evs []keyEvent) {
	slices.SortFunc(evs, func(a, b keyEvent) int {
		return cmp.Or(cmp.Compare(a.ModRev, b.ModRev), strings.Compare(a.Key, b.Key))
	})
}
