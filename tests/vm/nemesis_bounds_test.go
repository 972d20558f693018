package vm

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Hand-off and release, judged against the bounds docs/failures.md states: a release is a
// child's end to etcd's deletion of its key (conch's revoke); a hand-off is a key's deletion
// that freed a slot to the next start of a key that waited then (its child's start, or, for
// a --once-per run that found the period done, its key's deletion: the slot was taken and
// given up). With no fault in force from a TTL before the span to its end, the bound is one
// hand-off on a loaded machine (handoff: measured medians 17-50 ms, maxima up to 261 ms);
// after a fault, the slot may wait for a lease to expire and a holder to be fenced: from the
// latest heal of those faults (or the span's start, if later), the TTL, --kill-after and one
// hand-off. Faults that overlap a span are what it is put down to in the run's summary.

// boundSpan is one measured release or hand-off.
type boundSpan struct {
	From, To int64  // CLOCK_MONOTONIC ns
	What     string // the span, as a violation tells it
}

// faultsIn returns the faults in force from a TTL before from until to.
func (h nemHistory) faultsIn(from, to int64) []faultEv {
	var out []faultEv
	for _, f := range h.Faults {
		if f.From <= to && f.end() >= from-int64(h.Phase.TTL) {
			out = append(out, f)
		}
	}
	return out
}

// bound is the longest span from from may last given the faults fs in force around it, and
// the words that say how it was derived.
func (h nemHistory) bound(from int64, fs []faultEv) (time.Duration, string) {
	if len(fs) == 0 {
		return handoff, "no fault: one hand-off"
	}
	healed := from
	for _, f := range fs {
		healed = max(healed, f.end())
	}
	after := time.Duration(healed - from)
	b := after + h.Phase.TTL + h.Phase.KillAfter + handoff
	return b, fmt.Sprintf("after a fault: %v to the last heal + TTL %v + kill-after %v + one hand-off %v", ms(after), h.Phase.TTL, h.Phase.KillAfter, handoff)
}

// judgeSpan checks one span against its bound and keeps the worst per fault kind in worst.
func (h nemHistory) judgeSpan(v *verdict, s boundSpan, worst map[string]time.Duration, what string) {
	d := ms(time.Duration(max(0, s.To-s.From)))
	fs := h.faultsIn(s.From, s.To)
	kinds := []string{"none"}
	if len(fs) > 0 {
		kinds = nil
		for _, f := range fs {
			if !slices.Contains(kinds, f.Kind) {
				kinds = append(kinds, f.Kind)
			}
		}
	}
	for _, k := range kinds {
		worst[k] = max(worst[k], d)
	}
	if b, how := h.bound(s.From, fs); d > b {
		v.violate(h, s.From, fmt.Sprintf("%s took %v: %s (bound %v, %s)", what, d, s.What, ms(b), how))
	}
}

// bounds measures and judges every release and hand-off of chs (as windows() made them).
func (h nemHistory) bounds(v *verdict, chs []childRec) {
	keys := replay(h.Keys, h.Phase.Max)
	byRev := map[int64]*keyLife{}
	for _, k := range keys {
		byRev[k.createRev] = k
	}
	child := map[int64]childRec{}
	for _, c := range chs {
		child[c.rev()] = c
		k := byRev[c.rev()]
		if k == nil || k.deleted == 1<<63-1 || c.until() == 1<<63-1 || c.until() > k.deleted {
			continue // no key, still there, or the child outlived it (check judges that)
		}
		h.judgeSpan(v, boundSpan{c.until(), k.deleted, fmt.Sprintf("child %s on %s ended at +%v, etcd deleted its key %s at +%v",
			c.ID, c.Node, h.rel(c.until()), shortKey(k.key), h.rel(k.deleted))}, v.WorstRelease, "release")
	}
	// takes: when each key that reached the first Max took its slot: its child's start, or its
	// deletion when it never ran a child (a --once-per skip, a conch killed while ranked).
	type take struct {
		at  int64
		key *keyLife
		how string
	}
	var takes []take
	for _, k := range keys {
		switch c, ok := child[k.createRev]; {
		case ok:
			takes = append(takes, take{c.Start, k, "child " + c.ID + " started"})
		case k.held != 0 && k.deleted != 1<<63-1:
			takes = append(takes, take{k.deleted, k, "its key was deleted without a child (a skip, or its conch gone)"})
		}
	}
	slices.SortFunc(takes, func(a, b take) int { return cmp.Compare(a.at, b.at) })
	used := make([]bool, len(takes))
	frees := slices.Clone(keys)
	slices.SortFunc(frees, func(a, b *keyLife) int { return cmp.Compare(a.deleted, b.deleted) })
	for _, f := range frees {
		if f.held == 0 || f.held > f.deleted || f.deleted == 1<<63-1 {
			continue // never held a slot, or still holds it
		}
		for i, t := range takes {
			k := t.key
			waited := k != f && k.created < f.deleted && k.deleted >= f.deleted && (k.held == 0 || k.held >= f.deleted)
			if used[i] || !waited || t.at < f.deleted-int64(startSlop) {
				continue
			}
			used[i] = true
			h.judgeSpan(v, boundSpan{f.deleted, t.at, fmt.Sprintf("etcd deleted %s at +%v (a slot free, %s waiting), %s at +%v",
				shortKey(f.key), h.rel(f.deleted), shortKey(k.key), t.how, h.rel(t.at))}, v.WorstHandoff, "hand-off")
			break
		}
	}
}
