package vm

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Scenario 14: the waiter's own member (first in its --endpoints) is stopped (SIGSTOP: its
// connections open and silent) while the holder on another node runs; the holder ends: the
// waiter starts about a second later whatever member its watch was on, not when gRPC's
// keep-alive gives up on the connection (13 s). Several runs, as clientv3 spreads the
// waiter's streams over the members: some put its watch on the stopped one. The stopped member
// is not the leader (no election in the figures).
func testSilentMember(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s11-silent", 1)
	leader, err := c.etcd.Leader(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, h := (leader+1)%clusterSize, leader
	const runs = 5
	var gaps []time.Duration
	for run := range runs {
		hp := s.job(h, nil, "-hold", "2s")
		holder := newest(s.waitChildren(2*run + 1))
		wp := s.job(m, nil, "-hold", "100ms")
		s.waitFor("the waiter's key", func() bool { return s.keys() == 2 })
		if err := c.etcd.StopMember(s.ctx, m); err != nil {
			t.Fatal(err)
		}
		s.wantExitWithin(hp, fmt.Sprintf("holder %d", run), time.Minute, 0)
		s.wantExitWithin(wp, fmt.Sprintf("waiter %d", run), time.Minute, 0)
		waiter := newest(s.children())
		gaps = append(gaps, since(s.child(holder.ID).until(), waiter.Start))
		if err := c.etcd.ContMember(s.ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := c.etcd.WaitHealthy(s.ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("scenario 14: member of the waiter's node stopped: the waiter started %v after the holder's child ended (%d runs)", gaps, runs)
	if worst := slices.Max(gaps); worst > 5*time.Second {
		t.Errorf("a waiter started %v after the holder ended, its member stopped: want about a second", worst)
	}
	s.verify(checkSpec{Handoff: 5 * time.Second})
}

// newest returns the child that started last.
func newest(chs []childRec) childRec {
	var n childRec
	for _, c := range chs {
		if c.Start > n.Start {
			n = c
		}
	}
	return n
}
