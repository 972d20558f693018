package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
)

// D13f: the two followers of a 3-member etcd stopped as a --hold-after run ends, for longer
// than the run's lease (--ttl 5s; 8 s after the command's end): the leader steps down, and a
// member without a leader expires no lease and renews every lease at the next election, so
// the run's key still holds the slot when the quorum is back. conch keeps trying the hold's
// grant and move past its own deadline while etcd says it has no leader, and the slot is kept
// once the quorum is back, instead of being given up (and revoked) on conch's own clock.
func TestHoldAfterRidesOutQuorumLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	members := etcdtest.StartCluster(t, 3)
	e := newEnvOn(t, members[0])
	for i, kv := range e.vars {
		if strings.HasPrefix(kv, "CONCH_ENDPOINTS=") {
			e.vars[i] = "CONCH_ENDPOINTS=" + etcdtest.Endpoints(members)
		}
	}
	p := e.start("sema", "hq", "--max", "1", "--ttl", "5s", "--kill-after", "1s", "--node", "n1", "--hold-after", "1h", "--scope=never", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	var followers []*etcdtest.Server
	waitFor(t, "a leader", func() bool {
		followers = nil
		for _, m := range members {
			if !m.IsLeader() {
				followers = append(followers, m)
			}
		}
		return len(followers) == 2
	})
	var leader *etcdtest.Server
	for _, m := range members {
		if m != followers[0] && m != followers[1] {
			leader = m
		}
	}
	var wg sync.WaitGroup
	for _, m := range followers {
		wg.Add(1)
		go func() { defer wg.Done(); m.Kill() }() // closing a member takes seconds: the loss is at once
	}
	waitFor(t, "the leader to step down", func() bool { return !leader.HasLeader() })
	e.open("a")
	wg.Wait()
	time.Sleep(8 * time.Second) // the quorum loss itself, past the run's lease's deadline on conch's clock
	for _, m := range followers {
		wg.Add(1)
		go func() { defer wg.Done(); m.Revive(t) }()
	}
	wg.Wait()
	r := p.wait(t)
	if r.status != 0 || !strings.Contains(r.stderr, "slot kept for 1h0m0s after the run") || strings.Contains(r.stderr, "cannot") {
		t.Fatalf("--hold-after through a quorum loss of 8 s at the run's end (--ttl 5s): %v, want 0 and the slot kept", r)
	}
	if got := e.heldAfterKeys("hq", 1); len(got) != 1 {
		t.Fatalf("held-after keys after the quorum loss: %v, want n1's", got)
	}
}
