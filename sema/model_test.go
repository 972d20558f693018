package sema

import (
	"fmt"
	"strings"
	"testing"
)

// An exhaustive model of the wake-up rule (D1, D1a), in pure Go: no etcd.
// N holders and W waiters are queued (process i owns the i-th oldest key);
// every reachable state is explored, each through every action enabled in
// it, so every interleaving of these is covered:
//
//   - environment: a holder releases, a waiter gives up, any key's lease
//     expires (each deletes the process's key for good), etcd compacts
//     (at most once per run);
//   - processes: a waiter that has ranked creates its watches, a waiter
//     takes one of its pending notifications (watches deliver in any
//     order, the first one ends the wait), a promoted waiter rewrites its
//     key (the PUT that wakes the next waiter).
//
// Checked in every state: at most N processes hold. In every quiescent
// state (no process action enabled: all events delivered): every key of
// rank < N belongs to a holder (no slot idle while a waiter is eligible).
// On every store event (DELETE, PUT): at most 2 waiters woken (D1).
//
// Watches: a watch covers the store from its start. In the D1 modes a
// waiter's watches start at the ranking read + 1, so events between the
// read and the watch's creation are replayed, unless etcd compacted past
// the read meanwhile (ErrCompacted: re-rank). With D1a they start when
// created: if the store moved since the read, the waiter re-reads and acts
// on what changed (modelD1aNoReread drops the re-read, to show it is
// needed).

type modelRule int

const (
	modelStep4       modelRule = iota // 04_sema.md step 4: watch the key at rank r-N, re-rank on its DELETE
	modelD1                           // D1: head-only, watches from the ranking read + 1
	modelD1a                          // D1a: watches served at once, re-read when the store moved
	modelD1aNoReread                  // D1a without its re-read: a broken rule, for the check
)

func (r modelRule) String() string {
	return [...]string{"step4", "D1", "D1a", "D1a-no-reread"}[r]
}

const modelMaxProcs = 7 // N <= 3, W <= 4

type mStatus uint8

const (
	mGone mStatus = iota
	mHolding
	mRanked   // waiting: ranked, watches not yet created
	mWatching // waiting: watches created
)

type mProc struct {
	status  mStatus
	rewrite bool // holding: HELD rewrite (PUT) not yet done
	head    bool // ranked as the head: watches the holders for DELETE, promoted by one
	pred    int8 // ranked behind the head: its predecessor (D1), or for step4 the key at rank r-N
	nw      int8
	watched [3]int8
	// notifications: on created watches (pend*) or, for a watch not yet
	// created, events it will replay (miss*)
	pendPromote, pendRerank bool
	missPromote, missRerank bool
	moved                   bool // the store changed since the ranking read
	predPut                 bool // pred was rewritten since the ranking read
	compacted               bool // etcd compacted past the ranking read
}

type mState struct {
	p           [modelMaxProcs]mProc
	compactions int8
}

type model struct {
	rule     modelRule
	n, procs int
	seen     map[mState]bool
	path     []string
	err      error
	maxWoken int
}

// rank is the number of live keys older than process i's.
func (m *model) rank(s *mState, i int) int {
	r := 0
	for j := range i {
		if s.p[j].status != mGone {
			r++
		}
	}
	return r
}

// liveAt returns the process owning the live key of rank r.
func (m *model) liveAt(s *mState, r int) int8 {
	for j := range m.procs {
		if s.p[j].status != mGone {
			if r == 0 {
				return int8(j)
			}
			r--
		}
	}
	return -1
}

// rankNow is step 2 for process i: it holds (with a rewrite, except in the
// spec's rule) or waits with watches still to create.
func (m *model) rankNow(s *mState, i int) {
	r := m.rank(s, i)
	p := &s.p[i]
	if r < m.n {
		*p = mProc{status: mHolding, rewrite: m.rule != modelStep4}
		return
	}
	*p = mProc{status: mRanked, pred: -1}
	switch {
	case m.rule == modelStep4:
		p.pred = m.liveAt(s, r-m.n)
		p.watched[0], p.nw = p.pred, 1
	case r == m.n:
		p.head = true
		for k := range m.n {
			p.watched[k] = m.liveAt(s, k)
		}
		p.nw = int8(m.n)
	default:
		p.pred = m.liveAt(s, r-1)
		p.watched[0], p.nw = p.pred, 1
	}
}

// watches reports whether p's watches see an event on key k (PUTs count
// only for a D1 waiter's predecessor), and what it means.
func (m *model) watches(p *mProc, k int, put bool) (hit, promote bool) {
	for _, w := range p.watched[:p.nw] {
		if int(w) != k {
			continue
		}
		if put && (p.head || m.rule == modelStep4) {
			return false, false
		}
		return true, p.head
	}
	return false, false
}

// event applies a store event on key k to every waiter and returns how many
// it wakes.
func (m *model) event(s *mState, k int, put bool) int {
	woken := 0
	for i := range m.procs {
		p := &s.p[i]
		if i == k || (p.status != mRanked && p.status != mWatching) {
			continue
		}
		hit, promote := m.watches(p, k, put)
		if p.status == mRanked {
			p.moved = true
			p.predPut = p.predPut || (put && int(p.pred) == k)
		}
		if !hit {
			continue
		}
		pend, miss := &p.pendRerank, &p.missRerank
		if promote {
			pend, miss = &p.pendPromote, &p.missPromote
		}
		wakes := m.rule == modelStep4 || m.rule == modelD1 || p.status == mWatching // D1a's re-read is no wake-up
		if wakes && !p.pendPromote && !p.pendRerank && !p.missPromote && !p.missRerank {
			woken++
		}
		if p.status == mWatching {
			*pend = true
		} else {
			*miss = true
		}
	}
	return woken
}

// createWatch is process i creating its watches after its ranking read.
func (m *model) createWatch(s *mState, i int) {
	p := &s.p[i]
	switch m.rule {
	case modelStep4, modelD1:
		p.status = mWatching
		if p.compacted {
			p.pendRerank = true // ErrCompacted: re-rank (D1)
			return
		}
		p.pendPromote, p.pendRerank = p.missPromote, p.missRerank // replayed from the read + 1
	case modelD1aNoReread:
		p.status, p.missPromote, p.missRerank = mWatching, false, false // the gap is lost
	case modelD1a:
		if !p.moved {
			p.status = mWatching
			return
		}
		old := *p
		m.rankNow(s, i) // the re-read
		q := &s.p[i]
		if q.status == mHolding || old.head != q.head || old.pred != q.pred || old.predPut {
			return // moved: act on the re-read (hold, or watch what it says)
		}
		*q = old
		q.status, q.moved, q.missPromote, q.missRerank = mWatching, false, false, false
	}
}

func (m *model) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf("%s N=%d W=%d: %s\ntrace:\n  %s", m.rule, m.n, m.procs-m.n,
			fmt.Sprintf(format, args...), strings.Join(m.path, "\n  "))
	}
}

// check tests the state invariants.
func (m *model) check(s *mState) {
	holding, quiet := 0, true
	for i := range m.procs {
		p := &s.p[i]
		switch {
		case p.status == mHolding:
			holding++
			quiet = quiet && !p.rewrite
		case p.status == mRanked, p.pendPromote, p.pendRerank:
			quiet = false
		}
	}
	if holding > m.n {
		m.fail("%d hold, capacity %d", holding, m.n)
	}
	if !quiet {
		return
	}
	for i := range m.procs {
		if st := s.p[i].status; (st == mRanked || st == mWatching) && m.rank(s, i) < m.n {
			m.fail("all events delivered, yet waiter %d has rank %d < N and sleeps: a slot is idle", i, m.rank(s, i))
		}
	}
}

// step applies one action and explores from there.
func (m *model) step(s mState, what string, f func(*mState) int) {
	woken := f(&s)
	m.path = append(m.path, what)
	defer func() { m.path = m.path[:len(m.path)-1] }()
	m.maxWoken = max(m.maxWoken, woken)
	if woken > 2 {
		m.fail("%s woke %d waiters, want at most 2 (D1)", what, woken)
	}
	m.explore(s)
}

func (m *model) explore(s mState) {
	if m.err != nil || m.seen[s] {
		return
	}
	m.seen[s] = true
	m.check(&s)
	for i := range m.procs {
		p := s.p[i]
		if p.status == mGone {
			continue
		}
		del := func(s *mState) int { s.p[i] = mProc{}; return m.event(s, i, false) }
		m.step(s, fmt.Sprintf("lease of %d expires", i), del)
		switch p.status {
		case mHolding:
			m.step(s, fmt.Sprintf("%d releases", i), del)
			if p.rewrite {
				m.step(s, fmt.Sprintf("%d rewrites its key HELD", i), func(s *mState) int {
					s.p[i].rewrite = false
					return m.event(s, i, true)
				})
			}
		case mRanked, mWatching:
			m.step(s, fmt.Sprintf("%d gives up", i), del)
		}
		switch {
		case p.status == mRanked:
			m.step(s, fmt.Sprintf("%d creates its watches", i), func(s *mState) int { m.createWatch(s, i); return 0 })
		case p.pendPromote:
			m.step(s, fmt.Sprintf("%d sees a holder's DELETE: promoted", i), func(s *mState) int {
				s.p[i] = mProc{status: mHolding, rewrite: true}
				return 0
			})
		}
		if p.status == mWatching && p.pendRerank {
			m.step(s, fmt.Sprintf("%d is woken: re-ranks", i), func(s *mState) int { m.rankNow(s, i); return 0 })
		}
	}
	if s.compactions == 0 {
		m.step(s, "etcd compacts", func(s *mState) int {
			s.compactions++
			for i := range m.procs {
				if p := &s.p[i]; p.status == mRanked && p.moved {
					p.compacted = true
				}
			}
			return 0
		})
	}
}

// runModel explores rule with n slots and w waiters and returns the number
// of states, the most waiters one event woke, and the first violation (nil
// if none).
func runModel(rule modelRule, n, w int) (int, int, error) {
	m := &model{rule: rule, n: n, procs: n + w, seen: map[mState]bool{}}
	var s mState
	for i := range n {
		s.p[i] = mProc{status: mHolding} // held at once: no rewrite (D2)
	}
	for i := n; i < n+w; i++ {
		m.rankNow(&s, i)
	}
	m.explore(s)
	return len(m.seen), m.maxWoken, m.err
}

// TestModelWakeUpRule: D1 and D1a hold every invariant for every
// interleaving, N <= 3, W <= 4.
func TestModelWakeUpRule(t *testing.T) {
	t.Parallel()
	for _, rule := range []modelRule{modelD1, modelD1a} {
		for n := 1; n <= 3; n++ {
			for w := 0; w <= 4; w++ {
				states, woken, err := runModel(rule, n, w)
				if err != nil {
					t.Fatal(err)
				}
				if w == 4 {
					t.Logf("%s N=%d W=%d: %d states, at most %d woken per event", rule, n, w, states, woken)
				}
			}
		}
	}
}

// TestModelCatchesBrokenRules: the model finds D1's counter-example to the
// spec's step 4 (N=2: the younger holder leaves, a slot stays idle), and
// finds that D1a without its re-read loses a wake-up.
func TestModelCatchesBrokenRules(t *testing.T) {
	t.Parallel()
	_, _, err := runModel(modelStep4, 2, 2)
	if err == nil || !strings.Contains(err.Error(), "a slot is idle") {
		t.Fatalf("step 4 with N=2, W=2: %v, want an idle slot (D1's counter-example)", err)
	}
	t.Logf("found: %v", err)
	// D1's own trace, replayed: A(0) and B(1) hold, C(2) and D(3) wait; B
	// releases, D re-ranks. Step 4 leaves C asleep on A; D1 promotes C.
	for _, rule := range []modelRule{modelStep4, modelD1, modelD1a} {
		m := &model{rule: rule, n: 2, procs: 4, seen: map[mState]bool{}}
		var s mState
		s.p[0], s.p[1] = mProc{status: mHolding}, mProc{status: mHolding}
		m.rankNow(&s, 2)
		m.rankNow(&s, 3)
		m.createWatch(&s, 2)
		m.createWatch(&s, 3)
		s.p[1] = mProc{}
		m.event(&s, 1, false) // B releases
		m.deliverAll(&s)
		m.check(&s)
		if rule == modelStep4 && (m.err == nil || !strings.Contains(m.err.Error(), "waiter 2 has rank 1")) {
			t.Fatalf("step 4 on D1's counter-example: %v, want C (2) idle at rank 1", m.err)
		}
		if rule != modelStep4 && (m.err != nil || s.p[2].status != mHolding) {
			t.Fatalf("%s on D1's counter-example: %v, C %+v; want C holding", rule, m.err, s.p[2])
		}
	}
	if _, _, err := runModel(modelStep4, 1, 4); err != nil {
		t.Fatalf("step 4 is correct for N=1, but the model says: %v", err)
	}
	_, _, err = runModel(modelD1aNoReread, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "a slot is idle") {
		t.Fatalf("D1a without the re-read: %v, want an idle slot", err)
	}
	t.Logf("found: %v", err)
}

// deliverAll runs every process action (watch creation, notification,
// rewrite) until none is left, lowest process first: one interleaving, for
// replaying a given trace.
func (m *model) deliverAll(s *mState) {
	for again := true; again; {
		again = false
		for i := range m.procs {
			p := &s.p[i]
			switch {
			case p.status == mRanked:
				m.createWatch(s, i)
			case p.status == mWatching && p.pendPromote:
				*p = mProc{status: mHolding, rewrite: true}
			case p.status == mWatching && p.pendRerank:
				m.rankNow(s, i)
			case p.status == mHolding && p.rewrite:
				p.rewrite = false
				m.event(s, i, true)
			default:
				continue
			}
			again = true
		}
	}
}
