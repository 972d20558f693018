package vm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// Bounds derived from the timers, not measured figures: generous on purpose (shared machine).
const (
	// deadConn is how long conch may take to notice a dead connection to a member: gRPC
	// keep-alive (internal/etcdconn/keepalive.go: 10 s without traffic, then 3 s for the answer).
	deadConn = 13 * time.Second
	// election bounds an etcd leader election with election timeout 500 ms (1-2 s measured).
	election = 3 * time.Second
	// electedSettle is how long after a new leader is seen the writes that waited for one may
	// take to commit: the parties try again on their own clocks. A holder's revoke that failed
	// for want of a leader is tried again every 200 ms, each try bounded by 1 s (sema's
	// releaseRetry, releaseTry): 1.2 s at most; a waiter whose watch or read failed for want of
	// a leader (its watches require one) reads again after a back-off of at most 2 s (sema's
	// retryMax, followRetryMax). 2 s after the election both have tried again; the hand-off
	// proper (checkSpec.Handoff) is counted from then.
	electedSettle = 2 * time.Second
	// leaderPoll is the pause between two Status requests to one member in awaitLeader: it
	// bounds how late a new leader is seen, far below electedSettle.
	leaderPoll = 25 * time.Millisecond
)

// leaderGap is a leader election a fault caused, as leaderLoss measured it.
type leaderGap struct {
	lost   bool  // the fault took the leader away
	leader int   // the leader named after the fault
	fault  int64 // the fault's instant (CLOCK_MONOTONIC ns), taken before it
	seen   int64 // when a survivor first named leader (CLOCK_MONOTONIC ns)
}

// leaderless returns the span in which etcd had no leader, for checkSpec.Leaderless: from the
// fault to the new leader's first sighting plus electedSettle; none when the leader stayed.
func (g leaderGap) leaderless() []span {
	if !g.lost {
		return nil
	}
	return []span{{g.fault, g.seen + int64(electedSettle)}}
}

// String tells the gap for a scenario's report line.
func (g leaderGap) String() string {
	if !g.lost {
		return fmt.Sprintf("etcd kept its leader (member %d)", g.leader)
	}
	return fmt.Sprintf("etcd leaderless until member %d was seen leader %v after the fault: idle slots not judged until %v after it",
		g.leader, since(g.fault, g.seen), since(g.fault, g.seen+int64(electedSettle)))
}

// leaderLoss measures the leader election after a fault (begun at the CLOCK_MONOTONIC instant
// at, read before the fault: it may take effect at any time after) that took away the members
// not in survivors: it waits for the first answer of a survivor that names one of them leader
// (awaitLeader). The leader was lost unless the survivors' first answer named one of them
// already. It fails the test when no leader comes within the scenario's time.
func (s *scenario) leaderLoss(at int64, survivors ...int) leaderGap {
	s.t.Helper()
	a, first, err := s.awaitLeader(s.ctx, survivors, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	return leaderGap{lost: !first, leader: a.leader, fault: at, seen: a.at}
}

// leaderAnswer is a member's Status answer that names a leader.
type leaderAnswer struct {
	leader int   // the leader's index; -1: none, or not one of the members asked
	at     int64 // when the answer came (CLOCK_MONOTONIC ns)
}

// awaitLeader asks each of members for its status, every leaderPoll, each member in a
// goroutine of its own and each request bounded by 1 s (a member that does not answer delays
// no other), until one names one of members as leader in a raft term above minTerm (0: any).
// It returns that answer, and whether it was the first answer of all (the leader was there
// all along); an error when ctx ends first.
func (c *cluster) awaitLeader(ctx context.Context, members []int, minTerm uint64) (leaderAnswer, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	answers := make(chan leaderAnswer)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, i := range members {
		wg.Go(func() { c.pollStatus(ctx, i, members, minTerm, answers) })
	}
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return leaderAnswer{}, false, fmt.Errorf("no member of %v named one of them leader: %w", members, ctx.Err())
		case a := <-answers:
			if a.leader >= 0 {
				return a, first, nil
			}
		}
	}
}

// pollStatus is awaitLeader's poll of member i: it sends each answer to out until ctx ends.
func (c *cluster) pollStatus(ctx context.Context, i int, members []int, minTerm uint64, out chan<- leaderAnswer) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.members[i].Status(sctx, c.etcd.Endpoint(i))
		cancel()
		if err == nil {
			a := leaderAnswer{leader: -1, at: monoNow()}
			if j := slices.Index(c.ids, st.Leader); j >= 0 && slices.Contains(members, j) && st.RaftTerm > minTerm {
				a.leader = j
			}
			select {
			case out <- a:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaderPoll):
		}
	}
}

// holderAndWaiters starts the scenario's holder on node h (its child from histchild args
// child), waits for it to run, then starts waiters (one per node in ws, in that order, each
// enqueued before the next), each holding 300 ms. It returns the holder's child record.
func (s *scenario) holderAndWaiters(h int, flags []string, child []string, ws ...int) childRec {
	s.t.Helper()
	s.job(h, flags, child...)
	holder := s.waitChildren(1)[0]
	for k, w := range ws {
		s.job(w, flags, "-hold", "300ms")
		s.waitFor(fmt.Sprintf("waiter %d's key", k+1), func() bool { return s.keys() == k+2 })
	}
	return holder
}

// child returns the record of the child with ID id, as it is now.
func (s *scenario) child(id string) childRec {
	for _, c := range s.children() {
		if c.ID == id {
			return c
		}
	}
	return childRec{}
}

// firstOther waits for the first child other than id to start and returns it.
func (s *scenario) firstOther(id string, within time.Duration) childRec {
	s.t.Helper()
	var got childRec
	deadline := time.Now().Add(within)
	s.waitFor("a waiter's child to start", func() bool {
		if time.Now().After(deadline) {
			s.t.Fatalf("no waiter started within %v", within)
		}
		for _, c := range s.children() {
			if c.ID != id && (got.ID == "" || c.Start < got.Start) {
				got = c
			}
		}
		return got.ID != ""
	})
	return got
}

// gone waits until the host saw child id end (pidfd or its own record) and returns the
// record; it fails the test when that takes longer than within.
func (s *scenario) gone(id string, within time.Duration) childRec {
	s.t.Helper()
	var c childRec
	deadline := time.Now().Add(within)
	s.waitFor("child "+id+" to end", func() bool {
		if time.Now().After(deadline) {
			s.t.Fatalf("child %s still runs %v later", id, within)
		}
		c = s.child(id)
		return c.until() < 1<<63-1
	})
	return c
}

// wantExitWithin is wantExit for a conch that must end within d.
func (s *scenario) wantExitWithin(p *systemdtest.Proc, what string, d time.Duration, codes ...int) int {
	s.t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		s.t.Fatalf("%s: conch still runs %v later", what, d)
	}
	return s.wantExit(p, what, codes...)
}

// since returns how long after the monotonic time from the monotonic time to happened.
func since(from, to int64) time.Duration { return ms(time.Duration(to - from)) }
