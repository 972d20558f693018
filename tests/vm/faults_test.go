package vm

import (
	"fmt"
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
)

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
