package vm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The nemesis: every few seconds it applies one or two faults at random, each for a random
// time, then heals it. Every choice (the gap, how many, which kind, which node or process, how
// long) is drawn from one generator seeded with the run's seed, in the scheduler's goroutine,
// so a seed replays the same schedule; what the faults meet (which conch holds at that
// instant, who leads etcd) depends on timing and is not replayed.

// Fault kinds. Each is applied by the host to the cluster's nodes (internal/systemdtest).
const (
	fPower        = "power-loss"       // a node's whole cgroup SIGKILLed, then booted again on its disk, its member restarted
	fCut          = "partition-both"   // a node's bridge port down: nothing in or out
	fOneWay       = "partition-oneway" // a node drops what it sends, still hears
	fPair         = "partition-pair"   // two members lose each other, both still reach the third
	fFreeze       = "node-freeze"      // the node's cgroup frozen (a paused VM)
	fStopHolder   = "stop-conch-holder"
	fStopWaiter   = "stop-conch-waiter"
	fStopGuardian = "stop-guardian"
	fKillConch    = "kill-conch"
	fKillEtcd     = "kill-etcd"  // a member SIGKILLed (leader or follower), started again on its data
	fStallEtcd    = "stall-etcd" // a member SIGSTOPped for less than the TTL (leader or follower)
	fWipeEtcd     = "wipe-etcd"  // a member SIGKILLed, its data directory deleted, then removed and added again (leader or follower)
)

// faultKinds is the default set: every kind the current code is held to.
var faultKinds = []string{fPower, fCut, fOneWay, fPair, fFreeze, fStopHolder, fStopWaiter, fStopGuardian, fKillConch, fKillEtcd, fStallEtcd, fWipeEtcd}

// faultEv is one fault as applied.
type faultEv struct {
	Kind   string
	Detail string // the target, as the time line tells it
	Node   int    // the node it hit (-1: none)
	Peer   int    // a pair partition's other node (-1: none)
	Unit   string // a process fault's conch unit
	From   int64  // when it was applied (CLOCK_MONOTONIC ns, read before applying)
	To     int64  // when it was healed (0: an instant fault)
	Err    string // why it could not be applied or healed
}

// end returns when the fault's effect was undone (From for an instant one).
func (f faultEv) end() int64 { return max(f.To, f.From) }

// nemesis applies faults to a cluster until its context ends.
type nemesis struct {
	c     *cluster
	rng   *rand.Rand
	kinds []string
	ttl   time.Duration

	mu      sync.Mutex
	busy    map[int]bool // nodes under a node fault
	down    map[int]bool // nodes powered off, or not yet booted again with their member
	pids    map[int]bool // conchs under a process fault
	wiping  bool         // a member is wiped and not yet replaced: a second wipe would take the quorum its replacement needs
	log     []faultEv
	skipped map[string]int // drawn, but no target was free
	wg      sync.WaitGroup
}

func newNemesis(c *cluster, seed uint64, kinds []string, ttl time.Duration) *nemesis {
	return &nemesis{c: c, rng: rand.New(rand.NewPCG(seed, 0x6e656d)), kinds: kinds, ttl: ttl,
		busy: map[int]bool{}, down: map[int]bool{}, pids: map[int]bool{}, skipped: map[string]int{}}
}

// run applies faults until ctx ends, then heals what is still applied and returns once every
// fault's goroutine is done.
func (nm *nemesis) run(ctx context.Context) {
	defer nm.wg.Wait()
	for {
		gap := 1500*time.Millisecond + time.Duration(nm.rng.Int64N(int64(2500*time.Millisecond)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		n := 1
		if nm.rng.IntN(3) == 0 {
			n = 2
		}
		for range n {
			nm.start(ctx, nm.draw())
		}
	}
}

// plan is one drawn fault: everything random about it, drawn in the scheduler's goroutine.
type plan struct {
	kind    string
	node    int           // a node index, or an index among candidates
	peer    int           // a pair partition's other node (offset 1 or 2 from node)
	leader  bool          // kill-etcd, stall-etcd: the leader, else a follower
	pick    uint64        // which of several candidate processes
	holdFor time.Duration // how long the fault lasts
}

// draw draws the next fault.
func (nm *nemesis) draw() plan {
	p := plan{kind: nm.kinds[nm.rng.IntN(len(nm.kinds))], node: nm.rng.IntN(clusterSize), leader: nm.rng.IntN(2) == 0, pick: nm.rng.Uint64()}
	p.peer = (p.node + 1 + nm.rng.IntN(clusterSize-1)) % clusterSize
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(nm.rng.Int64N(int64(hi-lo))) }
	switch p.kind {
	case fPower:
		p.holdFor = between(500*time.Millisecond, 3*time.Second)
	case fCut, fOneWay, fPair:
		p.holdFor = between(time.Second, 2*nm.ttl)
	case fFreeze:
		p.holdFor = between(500*time.Millisecond, 2*nm.ttl) // past the TTL at times: D7b's window
	case fStopHolder, fStopWaiter:
		p.holdFor = between(500*time.Millisecond, 2*nm.ttl)
	case fStopGuardian:
		p.holdFor = between(300*time.Millisecond, 3*time.Second)
	case fKillEtcd, fWipeEtcd:
		p.holdFor = between(500*time.Millisecond, 4*time.Second)
	case fStallEtcd:
		p.holdFor = between(300*time.Millisecond, nm.ttl*8/10) // shorter than the TTL
	}
	return p
}

// reserveNode takes node i for a node fault; false when it is taken or when two nodes are
// faulted already (one node always stays whole, so the run goes on between faults).
func (nm *nemesis) reserveNode(i int) bool {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	if nm.busy[i] || len(nm.busy) >= 2 {
		return false
	}
	nm.busy[i] = true
	return true
}

// isDown reports whether node i is powered off or still booting again: no job can start there.
func (nm *nemesis) isDown(i int) bool {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return nm.down[i]
}

func (nm *nemesis) setDown(i int, down bool) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.down[i] = down
}

// reserveWipe takes the one wipe allowed at a time; false when a member is being replaced.
func (nm *nemesis) reserveWipe() bool {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	if nm.wiping {
		return false
	}
	nm.wiping = true
	return true
}

func (nm *nemesis) freeWipe() {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.wiping = false
}

func (nm *nemesis) freeNode(i int) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	delete(nm.busy, i)
}

// reservePID takes conch pid for a process fault; false when another has it.
func (nm *nemesis) reservePID(pid int) bool {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	if nm.pids[pid] {
		return false
	}
	nm.pids[pid] = true
	return true
}

func (nm *nemesis) freePID(pid int) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	delete(nm.pids, pid)
}

func (nm *nemesis) skip(kind string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.skipped[kind]++
}

func (nm *nemesis) record(f faultEv) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.log = append(nm.log, f)
}

// faults returns the faults applied so far, by start.
func (nm *nemesis) faults() []faultEv {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := slices.Clone(nm.log)
	slices.SortFunc(out, func(a, b faultEv) int { return int(a.From - b.From) })
	return out
}

// start applies p in a goroutine of its own: it reserves its target, applies the fault, waits
// p.holdFor (or until ctx ends), heals it and records it.
func (nm *nemesis) start(ctx context.Context, p plan) {
	nm.wg.Go(func() {
		switch p.kind {
		case fStopHolder, fStopWaiter, fStopGuardian, fKillConch:
			nm.processFault(ctx, p)
		default:
			nm.nodeFault(ctx, p)
		}
	})
}

// hold waits d or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// bounded is a context for one fault's own operations (apply, heal), independent of the
// phase's end: a fault is always healed.
func bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// nodeFault applies a fault that takes a node or its member.
func (nm *nemesis) nodeFault(ctx context.Context, p plan) {
	c := nm.c
	i, leaderNote := p.node, ""
	if p.kind == fKillEtcd || p.kind == fStallEtcd || p.kind == fWipeEtcd {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := c.etcd.Leader(lctx)
		cancel()
		switch {
		case err != nil:
			leaderNote = "member (no leader known)"
		case p.leader:
			i, leaderNote = l, "leader"
		default:
			i, leaderNote = (l+1+p.node%(clusterSize-1))%clusterSize, "follower"
		}
	}
	ok := nm.reserveNode(i)
	if ok && p.kind == fWipeEtcd && !nm.reserveWipe() {
		nm.freeNode(i)
		ok = false
	}
	if ok && p.kind == fPair && !nm.reserveNode(p.peer) {
		nm.freeNode(i)
		ok = false
	}
	if !ok {
		nm.skip(p.kind)
		return
	}
	defer nm.freeNode(i)
	if p.kind == fWipeEtcd {
		defer nm.freeWipe()
	}
	if p.kind == fPair {
		defer nm.freeNode(p.peer)
	}
	n := c.nodes[i]
	if n.Init() == 0 {
		nm.skip(p.kind)
		return
	}
	f := faultEv{Kind: p.kind, Node: i, Peer: -1, Detail: n.Name()}
	octx, cancel := bounded()
	defer cancel()
	var apply func() error
	var heal func() error
	switch p.kind {
	case fPower:
		apply = func() error {
			nm.setDown(i, true)
			return n.PowerOff()
		}
		heal = func() error {
			defer nm.setDown(i, false)
			if err := n.Reboot(); err != nil {
				return err
			}
			return c.etcd.StartMember(octx, i)
		}
	case fCut:
		apply, heal = func() error { return c.nw.Cut(i) }, func() error { return c.nw.Heal(i) }
	case fOneWay:
		apply, heal = func() error { return c.nw.DropOutgoing(i) }, func() error { return c.nw.AllowOutgoing(i) }
	case fPair:
		f.Peer = p.peer
		f.Detail = fmt.Sprintf("%s <-/-> %s", n.Name(), c.nodes[p.peer].Name())
		apply, heal = func() error { return c.nw.DropBetween(i, p.peer) }, func() error { return c.nw.AllowBetween(i) }
	case fFreeze:
		apply, heal = func() error { return n.Freeze(octx) }, func() error { return n.Thaw(octx) }
	case fKillEtcd:
		f.Detail = fmt.Sprintf("%s of %s", leaderNote, n.Name())
		apply = func() error { return c.etcd.KillMember(octx, i) }
		heal = func() error { return c.etcd.StartMember(octx, i) }
	case fWipeEtcd:
		// The member's disk lost for good, and the member replaced as etcd's runtime
		// reconfiguration guide says: the cluster keeps its ID and revisions.
		f.Detail = fmt.Sprintf("%s of %s", leaderNote, n.Name())
		apply = func() error { return c.etcd.WipeMember(octx, i) }
		heal = func() error { return c.etcd.RejoinMember(octx, i) }
	case fStallEtcd:
		f.Detail = fmt.Sprintf("%s of %s", leaderNote, n.Name())
		apply, heal = func() error { return c.etcd.StopMember(octx, i) }, func() error { return c.etcd.ContMember(octx, i) }
	}
	f.From = monoNow()
	if err := apply(); err != nil {
		f.Err = "apply: " + err.Error()
	}
	hold(ctx, p.holdFor)
	if err := heal(); err != nil {
		f.Err += " heal: " + err.Error()
	}
	f.To = monoNow()
	nm.record(f)
}

// processFault stops, or kills, one conch or guardian of node p.node.
func (nm *nemesis) processFault(ctx context.Context, p plan) {
	n := nm.c.nodes[p.node]
	var cands []conchProc
	for _, cp := range conchProcs(n) {
		switch {
		case p.kind == fStopHolder && cp.holding, p.kind == fStopWaiter && !cp.holding,
			p.kind == fStopGuardian && cp.guardian != 0, p.kind == fKillConch:
			cands = append(cands, cp)
		}
	}
	if len(cands) == 0 {
		nm.skip(p.kind)
		return
	}
	cp := cands[p.pick%uint64(len(cands))]
	if !nm.reservePID(cp.pid) {
		nm.skip(p.kind)
		return
	}
	defer nm.freePID(cp.pid)
	f := faultEv{Kind: p.kind, Node: p.node, Peer: -1, Unit: cp.unit}
	target := cp.pid
	role := "waiter"
	if cp.holding {
		role = "holder"
	}
	f.Detail = fmt.Sprintf("conch %s (%s) on %s", cp.unit, role, n.Name())
	if p.kind == fStopGuardian {
		target = cp.guardian
		f.Detail = "guardian of " + f.Detail
	}
	// A pidfd: the signals reach this process, never another that reused its PID.
	fd, err := unix.PidfdOpen(target, 0)
	if err != nil {
		nm.skip(p.kind) // gone since the listing
		return
	}
	defer unix.Close(fd)
	f.From = monoNow()
	if p.kind == fKillConch {
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			f.Err = err.Error()
		}
		nm.record(f)
		return
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
		f.Err = err.Error()
	}
	hold(ctx, p.holdFor)
	_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0) // gone meanwhile (fenced, killed with its node): fine
	f.To = monoNow()
	nm.record(f)
}
