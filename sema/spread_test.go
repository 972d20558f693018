package sema

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// spreadSem is a --spread semaphore (D11) of node.
func spreadSem(t *testing.T, c *clientv3.Client, name string, max int, node string, opts Options) *Semaphore {
	t.Helper()
	opts.Spread, opts.Node = true, node
	return newSem(t, c, name, max, opts)
}

// eventLog collects a semaphore's events for polling from the test.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.evs = append(l.evs, e); l.mu.Unlock() }

// waitFor polls until an event matching ok was emitted.
func (l *eventLog) waitFor(t *testing.T, what string, ok func(Event) bool) Event {
	t.Helper()
	var found Event
	polltest.Until(t, testTimeout, "a "+what+" event", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.IndexFunc(l.evs, ok)
		if i >= 0 {
			found = l.evs[i]
		}
		return i >= 0
	})
	return found
}

func nodeBusy(e Event) bool { return e.Kind == Waiting && e.NodeBusy }

// D11: the spread key is <prefix><node>, bound to the lease; a second
// --nonblock job on the same node finds no slot (ErrNoSlot with
// errNodeHasKey) although a slot is free, and leaves no key or lease behind;
// another node takes the free slot.
func TestSpreadOneSlotPerNode(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	a1 := mustAcquire(t, spreadSem(t, c, "sp", 2, "node-a", Options{}))
	if want := schema.Prefix("sp", 2) + "node-a"; a1.Key() != want {
		t.Fatalf("spread key %q, want %q", a1.Key(), want)
	}
	resp, err := c.Get(t.Context(), a1.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(a1.Lease()) {
		t.Fatalf("spread key not bound to the holder's lease: %v %v", resp, err)
	}
	leases, err := c.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := spreadSem(t, c, "sp", 2, "node-a", Options{Nonblock: true})
	_, err = s.Acquire(t.Context())
	if !errors.Is(err, ErrNoSlot) || !errors.Is(err, errNodeHasKey) {
		t.Fatalf("second job on node-a with a slot free: %v, want ErrNoSlot and errNodeHasKey", err)
	}
	if n := keyCount(t, c, s); n != 1 {
		t.Fatalf("%d keys after the refusal, want 1", n)
	}
	if after, err := c.Leases(t.Context()); err != nil || len(after.Leases) != len(leases.Leases) {
		t.Fatalf("leases %d before, %v after the refusal (%v): its lease must be revoked", len(leases.Leases), after, err)
	}
	b1 := mustAcquire(t, spreadSem(t, c, "sp", 2, "node-b", Options{}))
	release(t, a1)
	a2, err := s.Acquire(t.Context())
	if err != nil {
		t.Fatalf("node-a after its holder released: %v", err)
	}
	release(t, a2)
	release(t, b1)
}

// D11: with a wait, a second job on a node that holds waits for the node's
// key to go (NodeBusy), then enqueues at the back: N=2 with three nodes,
// a job of node-a waiting behind node-c's ordinary queue place.
func TestSpreadSecondJobWaitsThreeNodes(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	const n = 2
	a1 := mustAcquire(t, spreadSem(t, c, "sp3", n, "node-a", Options{}))
	b1 := mustAcquire(t, spreadSem(t, c, "sp3", n, "node-b", Options{}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var cLog, aLog eventLog
	cch := acquireAsync(ctx, spreadSem(t, c, "sp3", n, "node-c", Options{OnEvent: cLog.add}))
	cLog.waitFor(t, "node-c Waiting", func(e Event) bool { return e.Kind == Waiting && !e.NodeBusy })
	ach := acquireAsync(ctx, spreadSem(t, c, "sp3", n, "node-a", Options{OnEvent: aLog.add}))
	aLog.waitFor(t, "node-a NodeBusy", nodeBusy)
	if k := keyCount(t, c, a1.s); k != 3 {
		t.Fatalf("%d keys, want 3: a job whose node has a key writes none", k)
	}
	release(t, a1) // frees a slot (node-c, the head, takes it) and node-a's key
	rc := <-cch
	if rc.err != nil {
		t.Fatalf("node-c: %v", rc.err)
	}
	// node-a enqueues again, at the back: behind node-b and node-c, it waits
	aLog.waitFor(t, "node-a enqueued", func(e Event) bool { return e.Kind == Enqueued })
	select {
	case r := <-ach:
		t.Fatalf("node-a acquired with node-b and node-c holding: %v", r.err)
	case <-time.After(200 * time.Millisecond): // negative check: it must keep waiting
	}
	release(t, b1)
	ra := <-ach
	if ra.err != nil {
		t.Fatalf("node-a after node-b released: %v", ra.err)
	}
	if n := etcdtest.KeysUnder(t, c, schema.Prefix("sp3", n)); n != 2 {
		t.Fatalf("%d keys under the prefix; want node-c's and node-a's", n)
	}
	release(t, rc.h)
	release(t, ra.h)
}

// D11 with --wait: a job whose node's key does not go within the wait gets
// ErrTimeout (75), its lease revoked and no key of its own written.
func TestSpreadWaitRunsOut(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	a1 := mustAcquire(t, spreadSem(t, c, "spw", 3, "node-a", Options{}))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := spreadSem(t, c, "spw", 3, "node-a", Options{}).Acquire(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("second job on node-a, wait 300ms: %v, want ErrTimeout", err)
	}
	if k := keyCount(t, c, a1.s); k != 1 {
		t.Fatalf("%d keys, want node-a's only", k)
	}
	release(t, a1)
}

// A crashed spread holder (its lease revoked, as at expiry) frees its node's
// slot: the node's waiting job takes it (D11, D7).
func TestSpreadCrashFreesNodeSlot(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	a1 := mustAcquire(t, spreadSem(t, c, "spc", 1, "node-a", Options{}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var aLog eventLog
	ach := acquireAsync(ctx, spreadSem(t, c, "spc", 1, "node-a", Options{OnEvent: aLog.add}))
	aLog.waitFor(t, "NodeBusy", nodeBusy)
	if _, err := c.Revoke(t.Context(), a1.Lease()); err != nil {
		t.Fatal(err)
	}
	r := <-ach
	if r.err != nil {
		t.Fatalf("node-a's waiting job after its holder crashed: %v", r.err)
	}
	<-a1.Context().Done()
	a1.Release(t.Context())
	release(t, r.h)
}

// D11: lease-suffixed and node-suffixed keys under one (name, max) are a
// mistake: each side's Enqueued event counts the other kind.
func TestSpreadMixedKindsWarn(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	plain := mustAcquire(t, newSem(t, c, "mix", 3, Options{}))
	var sLog eventLog
	sp := mustAcquire(t, spreadSem(t, c, "mix", 3, "node-a", Options{OnEvent: sLog.add}))
	if e := sLog.waitFor(t, "Enqueued", func(e Event) bool { return e.Kind == Enqueued }); e.OtherKind != 1 {
		t.Fatalf("spread acquire next to a lease key: OtherKind %d, want 1", e.OtherKind)
	}
	var pLog eventLog
	p2 := mustAcquire(t, newSem(t, c, "mix", 3, Options{OnEvent: pLog.add}))
	if e := pLog.waitFor(t, "Enqueued", func(e Event) bool { return e.Kind == Enqueued }); e.OtherKind != 1 {
		t.Fatalf("lease acquire next to a spread key: OtherKind %d, want 1", e.OtherKind)
	}
	var qLog eventLog
	q := mustAcquire(t, newSem(t, c, "mix2", 3, Options{OnEvent: qLog.add}))
	if e := qLog.waitFor(t, "Enqueued", func(e Event) bool { return e.Kind == Enqueued }); e.OtherKind != 0 {
		t.Fatalf("lease keys only: OtherKind %d, want 0", e.OtherKind)
	}
	for _, h := range []*Holder{plain, sp, p2, q} {
		release(t, h)
	}
	// D6g: keys bound to no lease are not conch's and say nothing of how jobs run
	for _, k := range []string{schema.Prefix("mix3", 3) + "node-x", schema.Prefix("mix3", 3) + schema.FormatLeaseID(7)} {
		if _, err := c.Put(t.Context(), k, "by hand"); err != nil {
			t.Fatal(err)
		}
	}
	for _, spread := range []bool{false, true} {
		var l eventLog
		s := newSem(t, c, "mix3", 3, Options{OnEvent: l.add})
		if spread {
			s = spreadSem(t, c, "mix3", 3, "node-a", Options{OnEvent: l.add})
		}
		h := mustAcquire(t, s)
		if e := l.waitFor(t, "Enqueued", func(e Event) bool { return e.Kind == Enqueued }); e.OtherKind != 0 {
			t.Errorf("spread=%v beside keys bound to no lease: OtherKind %d, want 0", spread, e.OtherKind)
		}
		release(t, h)
	}
}

func TestValidateNode(t *testing.T) { // D11
	for _, n := range []string{"node1", "n1.example.org", "A", "0123456789abcdeF", "0123456789abcde"} {
		if err := schema.ValidateNode(n); err != nil {
			t.Errorf("ValidateNode(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range []string{"", "-x", "a/b", "a b", strings.Repeat("x", 129), "0123456789abcdef"} {
		if err := schema.ValidateNode(n); !errors.Is(err, schema.ErrBadNode) {
			t.Errorf("ValidateNode(%q) = %v, want ErrBadNode", n, err)
		}
	}
	if _, err := New(nil, "x", 1, Options{Spread: true, Node: "bad/node"}); !errors.Is(err, schema.ErrBadNode) {
		t.Errorf("New with a bad node: %v, want ErrBadNode", err)
	}
}

func TestSpreadKeysParse(t *testing.T) { // D11: how --who tells the kinds apart
	key := schema.NodeKey(schema.Prefix("x", 2), "node-a")
	if k := schema.ParseKey("x", key); k.Kind != schema.KeySpread || k.Suffix != "node-a" || k.Max != 2 {
		t.Fatalf("ParseKey(%q) = %+v, want KeySpread node-a", key, k)
	}
	if k := schema.ParseKey("x", schema.LeaseKey(schema.Prefix("x", 2), 0x694d7a1b2c3d4e5f)); k.Kind != schema.KeyLease {
		t.Fatalf("lease key parsed as %v", k.Kind)
	}
}
