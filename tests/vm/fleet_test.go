package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"testing"

	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/sema/schema"
)

// Scenario 11: the same HA job on three nodes, fired 20 times at once on all three with
// --once-per (D15): each round has exactly one successful run, whichever node gets the slot
// first; in every fifth round the first node's run fails, and another node runs it. Rounds
// start once the previous period's marker has expired.
func testOncePerHA(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s11-once", 1)
	const rounds, period = 20, 3 * time.Second
	flags := []string{"--once-per", period.String(), "--wait", "60s"}
	var ranOn []string
	var retried int
	for k := range rounds {
		before := len(s.children())
		var jobs []*systemdtest.Proc
		failing := k%5 == 4
		first := 0
		if failing { // a failing run holds the slot first, then the others queue
			first = k % clusterSize
			gate := filepath.Join(c.hist, fmt.Sprintf("s11-gate-%d", k))
			started := filepath.Join(histMount, fmt.Sprintf("s11-started-%d", k))
			script := fmt.Sprintf("touch %s; while [ ! -e %s ]; do sleep 0.05; done; exit 1", started,
				filepath.Join(histMount, filepath.Base(gate)))
			f := s.conch(first, append(append([]string{"sema", s.name, "--max", "1"}, flags...), "--", "/bin/sh", "-c", script)...)
			s.waitFor("the failing run to start", func() bool { _, err := os.Stat(filepath.Join(c.hist, filepath.Base(started))); return err == nil })
			for i := range clusterSize {
				if i != first {
					jobs = append(jobs, s.job(i, flags, "-hold", "200ms"))
				}
			}
			s.waitFor("the other two to queue", func() bool { return s.keys() == 3 })
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			s.wantExit(f, fmt.Sprintf("round %d: the failing run", k), 1)
		} else {
			for i := range clusterSize {
				jobs = append(jobs, s.job(i, flags, "-hold", "200ms"))
			}
		}
		skips := 0
		for _, p := range jobs {
			code, stderr := s.exit(p)
			if code != 0 {
				t.Errorf("round %d: conch exited %d, want 0; stderr: %s", k, code, stderr)
			}
			if strings.Contains(stderr, "skipped: this period's run is done") {
				skips++
			}
		}
		chs := s.children()
		if got := len(chs) - before; got != 1 || skips != len(jobs)-1 {
			t.Fatalf("round %d: %d successful runs and %d skips of %d jobs, want 1 and %d", k, got, skips, len(jobs), len(jobs)-1)
		}
		last := chs[0]
		for _, ch := range chs {
			last = latest(last, ch)
		}
		ranOn = append(ranOn, last.Node)
		if failing && last.Node != c.nodes[first].Name() {
			retried++
		}
		s.waitFor("the period's marker to expire", func() bool { return s.onceMarkers() == 0 })
	}
	t.Logf("scenario 11: %d rounds on 3 nodes, one successful run each, ran on %v; %d of %d failed first runs retried by another node",
		rounds, ranOn, retried, rounds/5)
	if retried != rounds/5 {
		t.Errorf("%d of %d failed runs retried on another node, want all", retried, rounds/5)
	}
	s.verify(checkSpec{Handoff: 5 * time.Second})
}

// onceMarkers counts the scenario's period markers in etcd now.
func (s *scenario) onceMarkers() int {
	s.t.Helper()
	resp, err := s.cli.Get(s.ctx, schema.OnceKey(s.name, s.max))
	if err != nil {
		s.t.Fatal(err)
	}
	return len(resp.Kvs)
}

// Scenario 12: a pause issued from one node (D16) stops starts on all three: a waiter queued on
// each node stays queued after the holder ends, --nonblock on each node exits 75 naming the
// pause; after a resume from another node the waiters run, one at a time, in queue order.
func testPauseAcrossNodes(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s12-pause", 1)
	gate := "s12-go"
	holder := s.job(0, nil, "-until", filepath.Join(histMount, gate))
	s.waitChildren(1)
	s.wantExit(s.conch(1, "sema", s.name, "--max", "1", "--pause", "--reason", "vm freeze"), "--pause from node 1", 0)
	var waiters []*systemdtest.Proc
	for i := range clusterSize {
		waiters = append(waiters, s.job(i, []string{"--wait", "2m"}, "-hold", "100ms"))
		s.waitFor("waiter to queue", func() bool { return s.keys() == i+2 })
	}
	if err := os.WriteFile(filepath.Join(c.hist, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wantExit(holder, "the holder, running on under the pause", 0)
	for i := range clusterSize {
		p := s.conch(i, "sema", s.name, "--max", "1", "--nonblock", "--", histchild, "-dir", histMount)
		if code, stderr := s.exit(p); code != 75 || !strings.Contains(stderr, "vm freeze") {
			t.Errorf("--nonblock on node %d while paused: %d %q, want 75 naming the pause", i, code, stderr)
		}
	}
	if n := len(s.children()); n != 1 {
		t.Fatalf("%d children while paused, want the first holder's only", n)
	}
	resumed := monoNow()
	s.wantExit(s.conch(2, "sema", s.name, "--max", "1", "--resume"), "--resume from node 2", 0)
	chs := s.waitChildren(1 + clusterSize)
	for _, w := range waiters {
		s.wantExit(w, "a waiter after the resume", 0)
	}
	order := []string{}
	for _, ch := range chs[1:] {
		order = append(order, ch.Node)
	}
	t.Logf("scenario 12: paused from %s, resumed from %s; first waiter started %v after --resume began; waiters ran on %v (queued on mn1, mn2, mn3)",
		c.nodes[1].Name(), c.nodes[2].Name(), ms(time.Duration(chs[1].Start-resumed)), order)
	for i, ch := range chs[1:] {
		if ch.Node != c.nodes[i].Name() {
			t.Errorf("waiter %d ran on %s, want %s: queue order lost", i, ch.Node, c.nodes[i].Name())
		}
	}
	s.verify(checkSpec{Handoff: 2 * time.Minute})
}
