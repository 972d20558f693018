package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Scenario 10: --spread (D11), N=2, 3 nodes x 3 jobs started together: at most one holder per
// node and 2 cluster-wide, all 9 complete. Then on one node: while its job holds, a second
// job there waits (a job on another node meanwhile takes the free cluster-wide slot and ends)
// and one with --nonblock exits 75. The node name is each node's hostname (conch's default).
func testSpread(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s10-spread", 2)
	spread := []string{"--spread"}
	began := time.Now()
	s.jobsAcross(3*3, spread, 100*time.Millisecond, 300*time.Millisecond)
	s.wantAllDone()
	t.Logf("scenario 10: 9 --spread jobs on 3 nodes done in %v", ms(time.Since(began)))

	release := "s10-release"
	holder := s.job(0, spread, "-until", histMount+"/"+release)
	s.waitChildren(10)
	asked := monoNow()
	nb := s.wantExit(s.job(0, append([]string{"--nonblock"}, spread...), "-hold", "100ms"), "--nonblock on the holding node", 75)
	refused := monoNow()
	second := s.job(0, spread, "-hold", "100ms")
	s.wantExit(s.job(1, spread, "-hold", "100ms"), "job on another node", 0)
	if n := len(s.children()); n != 11 || s.keys() != 1 {
		t.Fatalf("%d children, %d keys while node 0 holds and its second job waits; want 11 and 1 (node 0's)", n, s.keys())
	}
	freed := monoNow()
	if err := os.WriteFile(filepath.Join(s.hist, release), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wantExit(holder, "node 0's holder", 0)
	if code, stderr := s.exit(second); code != 0 || !strings.Contains(stderr, "this node already holds or waits") {
		t.Errorf("node 0's second job exited %d, want 0 after saying it waited for its node's key (D11); stderr: %s", code, stderr)
	}
	last := s.waitChildren(12)
	var next childRec
	for _, ch := range last {
		next = latest(next, ch)
	}
	t.Logf("scenario 10: --nonblock on the holding node exited %d after %v; the waiting second job started %v after its node's holder was released",
		nb, since(asked, refused), since(freed, next.Start))
	r := s.verify(checkSpec{Handoff: handoff})
	perNode := maxPerNode(s.children())
	t.Logf("scenario 10: at most %d at once cluster-wide, per node %v", r.MaxConcurrent, perNode)
	if r.Children != 12 || r.MaxConcurrent != 2 {
		t.Errorf("%d children ran, at most %d at once; want 12, and 2 at once", r.Children, r.MaxConcurrent)
	}
	for node, n := range perNode {
		if n > 1 {
			t.Errorf("%d children ran at once on %s, want at most 1 (--spread)", n, node)
		}
	}
}

// Scenario 10b: --spread --ttl 2s, a node loses power while it holds: its node key (its
// spread slot) frees within TTL + 1 s and the waiter on the third node takes it.
func testSpreadPowerLoss(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s10b-spread-power", 2)
	const ttl = 2 * time.Second
	leader, err := c.etcd.Leader(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, other, w := (leader+1)%3, (leader+2)%3, leader
	flags := []string{"--spread", "--ttl", "2s"}
	s.job(h, flags, "-hold", "60s")
	holder := s.waitChildren(1)[0]
	s.job(other, flags, "-hold", "5s")
	s.waitChildren(2)
	s.job(w, flags, "-hold", "300ms")
	s.waitFor("the waiter's key", func() bool { return s.keys() == 3 })
	off := monoNow()
	if err := c.nodes[h].PowerOff(); err != nil {
		t.Fatal(err)
	}
	var first childRec
	s.waitFor("the waiter's child on "+c.nodes[w].Name(), func() bool {
		for _, ch := range s.children() {
			if ch.Node == c.nodes[w].Name() {
				first = ch
			}
		}
		return first.ID != ""
	})
	freed := s.keyDeleted(holder)
	t.Logf("scenario 10b: power loss -> spread slot freed (node key deleted) %v, waiter on %s started %v",
		since(off, freed), first.Node, since(off, first.Start))
	if d := since(off, freed); d > ttl+time.Second {
		t.Errorf("the dead node's key went %v after the power loss, want within TTL + 1 s = %v", d, ttl+time.Second)
	}
	for k, p := range s.jobs[1:] {
		s.wantExit(p, fmt.Sprintf("job %d", k+1), 0)
	}
	s.verify(checkSpec{Handoff: ttl + time.Second + handoff})
}

// latest returns whichever of a and b started later.
func latest(a, b childRec) childRec {
	if b.Start > a.Start {
		return b
	}
	return a
}

// maxPerNode returns, per node, the largest number of children that ran at once there: the
// most that overlap the start of one of them (ends before starts at one instant).
func maxPerNode(chs []childRec) map[string]int {
	out := map[string]int{}
	for _, c := range chs {
		n := 0
		for _, o := range chs {
			if o.Node == c.Node && o.Start <= c.Start && o.until() > c.Start {
				n++
			}
		}
		out[c.Node] = max(out[c.Node], n)
	}
	return out
}
