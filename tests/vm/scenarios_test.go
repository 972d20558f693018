package vm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Scenario 2: a node loses power while it holds (--ttl 2s): its slot frees within TTL + 1 s,
// the survivors never exceed N, and once the node is back no stale key of it blocks anyone.
// The holder's node is not the leader's (a leader's loss adds an election: scenario 5).
func testPowerLoss(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s2-power", 1)
	const ttl = 2 * time.Second
	leader, err := c.etcd.Leader(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := (leader + 1) % clusterSize
	flags := []string{"--ttl", "2s"}
	holder := s.holderAndWaiters(h, flags, nil, (h+1)%3, (h+2)%3, (h+1)%3)
	off := monoNow()
	if err := c.nodes[h].PowerOff(); err != nil {
		t.Fatal(err)
	}
	first := s.firstOther(holder.ID, ttl+time.Second+election+handoff+10*time.Second)
	freed := s.keyDeleted(holder)
	t.Logf("scenario 2: power loss -> slot freed (key deleted) %v, first waiter started %v (on %s)",
		since(off, freed), since(off, first.Start), first.Node)
	if d := since(off, freed); d > ttl+time.Second {
		t.Errorf("the dead holder's key went %v after the power loss, want within TTL + 1 s = %v", d, ttl+time.Second)
	}
	for k, p := range s.jobs[1:] {
		s.wantExit(p, fmt.Sprintf("waiter %d", k+1), 0)
	}
	if err := c.heal(); err != nil {
		t.Fatal(err)
	}
	// No stale key of the node blocks it or anyone: a job on the rebooted node runs at once.
	asked := monoNow()
	s.wantExit(s.job(h, []string{"--wait", "30s"}, "-hold", "100ms"), "job on the rebooted node", 0)
	var last childRec
	for _, ch := range s.children() {
		if ch.Start > last.Start {
			last = ch
		}
	}
	t.Logf("scenario 2: after the reboot a job on that node started %v after it was asked", since(asked, last.Start))
	if since(asked, last.Start) > handoff+5*time.Second {
		t.Errorf("the job on the rebooted node waited %v: something blocked it", since(asked, last.Start))
	}
	s.verify(checkSpec{Handoff: ttl + time.Second + handoff})
}

// keyDeleted waits until the host saw the DELETE of c's key and returns when.
func (s *scenario) keyDeleted(c childRec) int64 {
	s.t.Helper()
	var at int64
	s.waitFor("the DELETE of the key of "+c.ID, func() bool {
		for _, k := range replay(s.obs.history(schema.Prefix(s.name, s.max)), s.max) {
			if k.createRev == c.rev() && k.deleted < 1<<63-1 {
				at = k.deleted
				return true
			}
		}
		return false
	})
	return at
}

// Scenario 3: a holder's node is partitioned while its child ignores SIGTERM (--ttl 3s
// --kill-after 1s): the child is gone (pidfd, from the host) before any waiter elsewhere
// starts, conch there exits 70, and a waiter on another node takes the slot after the lease
// expires. fault cuts node 0 off; four waiters on the other nodes make it likely that one of
// them watches through the cut member (the stranded-waiter bug). Node 0's member may be the
// leader: the election that follows is measured (leaderLoss) and its idle time not judged (the
// holder's lease can expire only under a leader).
func testPartition(t *testing.T, c *cluster, name string, fault func(int) error) {
	s := c.newScenario(t, name, 1)
	const ttl = 3 * time.Second
	flags := []string{"--ttl", "3s", "--kill-after", "1s"}
	holder := s.holderAndWaiters(0, flags, []string{"-ignore-term"}, 1, 2, 1, 2)
	cut := monoNow()
	if err := fault(0); err != nil {
		t.Fatal(err)
	}
	gap := s.leaderLoss(cut, 1, 2)
	first := s.firstOther(holder.ID, ttl+deadConn+handoff+10*time.Second)
	gone := s.gone(holder.ID, 10*time.Second)
	code := s.wantExitWithin(s.jobs[0], "the cut holder", ttl+10*time.Second, 70)
	overlap := since(first.Start, gone.until())
	t.Logf("scenario %s: cut -> holder's child gone %v (conch exited %d), first waiter started %v on %s: overlap %v (<= 0 wanted); %v",
		name, since(cut, gone.until()), code, since(cut, first.Start), first.Node, overlap, gap)
	if overlap > 0 {
		t.Errorf("the waiter on %s started %v before the cut holder's child was gone", first.Node, overlap)
	}
	for k, p := range s.jobs[1:] {
		s.wantExit(p, fmt.Sprintf("waiter %d", k+1), 0)
	}
	s.verify(checkSpec{Handoff: ttl + deadConn + handoff, Leaderless: gap.leaderless()})
}

// Scenario 4: the holder's node is frozen for longer than the TTL (--ttl 2s), until a waiter
// elsewhere has the slot, then thawed: conch notices at once and stops its child; the overlap
// window (the spec's "Failure behavior": the frozen child still exists while the waiter runs)
// is measured and printed. As in scenario 3, an election (node 0's member was leader) is
// measured and its idle time not judged.
func testStall(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s4-stall", 1)
	const ttl = 2 * time.Second
	flags := []string{"--ttl", "2s", "--kill-after", "1s"}
	holder := s.holderAndWaiters(0, flags, nil, 1, 2, 1, 2)
	frozen := monoNow()
	if err := c.nodes[0].Freeze(s.ctx); err != nil {
		t.Fatal(err)
	}
	gap := s.leaderLoss(frozen, 1, 2)
	first := s.firstOther(holder.ID, ttl+deadConn+handoff+10*time.Second)
	thawed := monoNow()
	if err := c.nodes[0].Thaw(s.ctx); err != nil {
		t.Fatal(err)
	}
	gone := s.gone(holder.ID, 10*time.Second)
	s.wantExitWithin(s.jobs[0], "the frozen holder", 10*time.Second, 70)
	t.Logf("scenario 4: freeze -> first waiter started %v on %s; thawed after %v; holder's child gone %v after the thaw (%s): overlap window %v; %v",
		since(frozen, first.Start), first.Node, since(frozen, thawed), since(thawed, gone.until()), gone.How, since(first.Start, gone.until()), gap)
	if d := since(thawed, gone.until()); d > 2*time.Second {
		t.Errorf("the thawed holder stopped its child %v after the thaw, want at once (within 2 s)", d)
	}
	for k, p := range s.jobs[1:] {
		s.wantExit(p, fmt.Sprintf("waiter %d", k+1), 0)
	}
	// The spec's window: the frozen child exists, cannot run, until the thaw; after the thaw it
	// must go at once (checked above). Past that, the checker's usual rules hold.
	s.verify(checkSpec{Handoff: ttl + deadConn + handoff, Overlap: time.Duration(thawed-frozen) + 2*time.Second, Leaderless: gap.leaderless()})
}

// Scenario 5: the leader member is killed while a holder's own member is that leader (default
// --ttl and --kill-after): no holder loses its slot (its child runs to its end, exit 0), no
// waiter is promoted early and the waiters keep their places (their first keys are the ones
// that run). Until the survivors elect a leader no write commits (the holder's release, a
// promotion): that span is measured (leaderLoss) and its idle time not judged.
func testLeaderLoss(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s5-leader", 1)
	leader, err := c.etcd.Leader(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// --ttl 20s: the holder is fenced once its last confirmed keep-alive is older than TTL -
	// kill-after - 1 s (D7), 4 s with the default 10 s. An election plus the client's
	// fail-over took longer than that on a loaded CI machine, and the fence then did what D7
	// says; this scenario is about surviving an election within the lease, so the lease is made
	// to cover a slow one.
	holder := s.holderAndWaiters(leader, []string{"--ttl", "20s"}, []string{"-hold", "6s"}, (leader+1)%3, (leader+2)%3)
	killed := monoNow()
	if err := c.etcd.KillMember(s.ctx, leader); err != nil {
		t.Fatal(err)
	}
	gap := s.leaderLoss(killed, (leader+1)%3, (leader+2)%3)
	s.wantExit(s.jobs[0], "the holder", 0)
	for k, p := range s.jobs[1:] {
		s.wantExit(p, fmt.Sprintf("waiter %d", k+1), 0)
	}
	chs := s.children()
	byRev := map[int64]childRec{}
	for _, ch := range chs {
		byRev[ch.rev()] = ch
	}
	h := s.child(holder.ID)
	keys := replay(s.obs.history(schema.Prefix(s.name, s.max)), s.max)
	if len(keys) != 3 || len(chs) != 3 || h.How != "done" {
		t.Fatalf("%d keys and %d children in the history, holder's child ended %q; want 3, 3 and done (nobody re-enqueued)", len(keys), len(chs), h.How)
	}
	w1, w2 := byRev[keys[1].createRev], byRev[keys[2].createRev]
	t.Logf("scenario 5: leader (member %d) killed -> %v; holder ran to its end; holder's end -> first waiter %v, then %v",
		leader, gap, since(h.until(), w1.Start), since(w1.until(), w2.Start))
	if w1.Start > w2.Start {
		t.Errorf("the second waiter started before the first: places not kept")
	}
	s.verify(checkSpec{Handoff: handoff, Leaderless: gap.leaderless()})
}

// Scenario 6: quorum is lost (two members down) for longer than the TTL: the holder stops its
// child by its deadline (70); a waiter with a long --wait re-enters once quorum returns and
// runs; one with a short --wait gives up (75, or 69: etcd unreachable when it ran out, D3);
// afterwards no key and no lease of conch is left. Idle time from the loss of quorum to a new
// leader after the heal (measured, healAndElect) is not judged.
func testQuorumLoss(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s6-quorum", 1)
	const ttl = 3 * time.Second
	holder := s.holderAndWaiters(0, []string{"--ttl", "3s", "--kill-after", "1s"}, nil)
	s.job(1, []string{"--ttl", "3s", "--wait", "90s"}, "-hold", "300ms")
	s.waitFor("the patient waiter's key", func() bool { return s.keys() == 2 })
	s.job(2, []string{"--ttl", "3s", "--wait", "4s"}, "-hold", "300ms")
	s.waitFor("the impatient waiter's key", func() bool { return s.keys() == 3 })
	term := s.raftTerm()
	down := monoNow()
	for _, m := range []int{1, 2} {
		if err := c.etcd.KillMember(s.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	gone := s.gone(holder.ID, ttl+10*time.Second)
	s.wantExitWithin(s.jobs[0], "the holder without quorum", ttl+10*time.Second, 70)
	impatient := s.wantExit(s.jobs[2], "the waiter with --wait 4s", 75, 69)
	up := monoNow()
	gap := s.healAndElect(down, term)
	s.wantExit(s.jobs[1], "the waiter with --wait 90s", 0)
	var w childRec
	for _, ch := range s.children() {
		if ch.ID != holder.ID {
			w = ch
		}
	}
	t.Logf("scenario 6: quorum lost -> holder's child gone %v (deadline: TTL %v), impatient waiter exited %d; quorum back after %v -> patient waiter started %v later; %v",
		since(down, gone.until()), ttl, impatient, since(down, up), since(up, w.Start), gap)
	if d := since(down, gone.until()); d > ttl {
		t.Errorf("the holder's child was gone %v after quorum was lost, want before its lease could expire (%v)", d, ttl)
	}
	// Until a leader is elected after the heal nothing commits: that span is not judged; from
	// then on the holder's key goes at its lease's expiry (the new leader's lessor counts the
	// TTL again) and a waiter may be on a connection to a dead member.
	s.verify(checkSpec{Handoff: ttl + deadConn + handoff, Leaderless: gap.leaderless()})
	s.waitFor("no lease left in etcd", func() bool {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		resp, err := c.cli.Leases(ctx)
		return err == nil && len(resp.Leases) == 0
	})
}

// raftTerm returns the raft term a member reports now (the highest of those that answer).
func (s *scenario) raftTerm() uint64 {
	s.t.Helper()
	var term uint64
	for i := range clusterSize {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		st, err := s.members[i].Status(ctx, s.etcd.Endpoint(i))
		cancel()
		if err == nil {
			term = max(term, st.RaftTerm)
		}
	}
	if term == 0 {
		s.t.Fatal("no etcd member told its raft term")
	}
	return term
}

// healAndElect heals the cluster (after a loss of quorum at the CLOCK_MONOTONIC instant
// down) while it waits, in parallel, for a member to name a leader of a term above term (the
// term before the loss: a leader that lost its quorum keeps its term). It returns the gap from
// down to that answer.
func (s *scenario) healAndElect(down int64, term uint64) leaderGap {
	s.t.Helper()
	type elected struct {
		a   leaderAnswer
		err error
	}
	ch := make(chan elected, 1)
	go func() {
		a, _, err := s.awaitLeader(s.ctx, []int{0, 1, 2}, term)
		ch <- elected{a, err}
	}()
	if err := s.heal(); err != nil {
		s.t.Fatal(err) // s.ctx ends at the scenario's cleanup, and with it the goroutine
	}
	e := <-ch
	if e.err != nil {
		s.t.Fatal(e.err)
	}
	return leaderGap{lost: true, leader: e.a.leader, fault: down, seen: e.a.at}
}

// Scenario 7: etcd is compacted at its current revision again and again while waiters watch:
// they re-rank and proceed, and no slot stays idle longer than a hand-off.
func testCompaction(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s7-compact", 1)
	ctx, stop := context.WithCancel(s.ctx)
	done := make(chan int)
	go func() { done <- compactLoop(ctx, c.cli) }()
	for i := range 9 {
		s.job(i%clusterSize, nil, "-hold", "150ms")
	}
	s.wantAllDone()
	stop()
	n := <-done
	t.Logf("scenario 7: %d compactions at the current revision while 9 jobs queued", n)
	if n == 0 {
		t.Error("no compaction happened")
	}
	s.verify(checkSpec{Handoff: handoff})
}

// compactLoop moves the revision on (a put outside conch's prefix) and compacts at it, every
// 50 ms until ctx ends; it returns how many compactions succeeded.
func compactLoop(ctx context.Context, cli *clientv3.Client) int {
	n := 0
	for ctx.Err() == nil {
		resp, err := cli.Put(ctx, "/compaction-tick", "x")
		if err == nil {
			if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err == nil {
				n++
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return n
}
