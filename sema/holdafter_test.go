package sema

import (
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldKV reads key: its value decoded, create revision and lease; ok false
// when it is gone.
func heldKV(t *testing.T, c *clientv3.Client, key string) (r schema.ReadRecord, rev, lease int64, ok bool) {
	t.Helper()
	resp, err := c.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return r, 0, 0, false
	}
	kv := resp.Kvs[0]
	return schema.DecodeRecord(kv.Value), kv.CreateRevision, kv.Lease, true
}

// D13: HoldAfter keeps the key (same create revision: rank and fencing
// token), moves it to a new lease of the hold's TTL, records the node and
// the end, revokes the old lease; the slot stays taken (a nonblocking
// acquire finds none) until the new lease expires, by etcd's clock.
func TestHoldAfterKeepsSlot(t *testing.T) {
	_, c := startEtcd(t)
	s := newSem(t, c, "hold", 1, Options{Record: schema.Record{Host: "node-a", PID: 1}})
	h := mustAcquire(t, s)
	old := h.Lease()
	ha, err := h.HoldAfter(t.Context(), 2*time.Second, schema.Record{Host: "node-a", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	held := time.Now()
	r, rev, lease, ok := heldKV(t, c, h.Key())
	if !ok || rev != h.Rev() || lease == int64(old) || lease != int64(ha.Lease) || !r.IsHeldAfter() || r.Host != "node-a" || r.Ended == nil || r.HeldUntil == nil {
		t.Fatalf("held key: ok %v rev %d (want %d) lease %x (old %x, hold %x) record %+v", ok, rev, h.Rev(), lease, old, ha.Lease, r)
	}
	if ttl, err := c.TimeToLive(t.Context(), old); err != nil || ttl.TTL != -1 {
		t.Fatalf("old lease %x after the hold: %+v %v, want revoked", old, ttl, err)
	}
	if ha.TTL != 2*time.Second || ha.Rev != h.Rev() || ha.Node != "node-a" {
		t.Fatalf("HeldAfter %+v", ha)
	}
	_, err = newSem(t, c, "hold", 1, Options{Nonblock: true}).Acquire(t.Context())
	if !errors.Is(err, ErrNoSlot) {
		t.Fatalf("acquire during the hold: %v, want ErrNoSlot", err)
	}
	h2 := mustAcquire(t, newSem(t, c, "hold", 1, Options{}))
	t.Logf("slot taken again %v after a 2 s hold began", time.Since(held).Round(time.Millisecond))
	if time.Since(held) < time.Second {
		t.Fatalf("slot free %v after a 2 s hold", time.Since(held))
	}
	release(t, h2)
}

// D13: a key that is no longer ours (an operator deleted it) cannot be held:
// HoldAfter says ErrKeyDeleted, leaves no key and no lease behind.
func TestHoldAfterKeyGone(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "holdgone", 1, Options{})
	h := mustAcquire(t, s)
	before, err := c.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.HoldAfter(t.Context(), 30*time.Second, schema.Record{Host: "n"}); !errors.Is(err, ErrKeyDeleted) {
		t.Fatalf("HoldAfter of a deleted key: %v, want ErrKeyDeleted", err)
	}
	if n := keyCount(t, c, s); n != 0 {
		t.Fatalf("%d keys left", n)
	}
	after, err := c.Leases(t.Context())
	if err != nil || len(after.Leases) != len(before.Leases)-1 {
		t.Fatalf("leases: %d before, %v after (%v): want the holder's and no hold's", len(before.Leases), after, err)
	}
}

// D13d: a move whose answer was lost but that was done is recognised on the next try, never
// taken for the key's loss: moveKey made twice finds the key on the hold's lease the second
// time and succeeds, the key's create revision unchanged; a key deleted meanwhile is still
// "no longer ours".
func TestMoveKeyTwice(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	h := mustAcquire(t, newSem(t, c, "mv", 1, Options{Record: schema.Record{Host: "n"}}))
	g, err := c.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	end := holdTries{c: c, end: time.Now().Add(testTimeout), limit: time.Now().Add(testTimeout)}
	for try := 1; try <= 2; try++ {
		if err := h.moveKey(t.Context(), "held", g.ID, end); err != nil {
			t.Fatalf("move, try %d: %v", try, err)
		}
	}
	if _, rev, lease, ok := heldKV(t, c, h.Key()); !ok || rev != h.Rev() || lease != int64(g.ID) {
		t.Fatalf("after two moves: present %v rev %d lease %x, want rev %d on the hold's lease %x", ok, rev, lease, h.Rev(), int64(g.ID))
	}
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	if err := h.moveKey(t.Context(), "held", g.ID, end); !errors.Is(err, ErrKeyDeleted) {
		t.Fatalf("move of a deleted key: %v, want ErrKeyDeleted", err)
	}
	_ = h.Release(t.Context())
}

// D13e: a refusal names the slots kept after a run (WaitError.HeldAfter), which costs one read;
// a caller that words no refusal (Options.Terse, conch -q) is spared it.
func TestRefusalNamesHeldAfterUnlessTerse(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	h := mustAcquire(t, newSem(t, c, "terse", 1, Options{Record: schema.Record{Host: "node-t", PID: 1}}))
	if _, err := h.HoldAfter(t.Context(), time.Minute, schema.Record{Host: "node-t", PID: 1}); err != nil {
		t.Fatal(err)
	}
	for _, terse := range []bool{false, true} {
		_, err := newSem(t, c, "terse", 1, Options{Nonblock: true, Terse: terse}).Acquire(t.Context())
		var we *WaitError
		if !errors.As(err, &we) || !errors.Is(err, ErrNoSlot) {
			t.Fatalf("terse %v: %v, want a *WaitError with ErrNoSlot", terse, err)
		}
		switch {
		case !terse && (len(we.HeldAfter) != 1 || we.HeldAfter[0].Node != "node-t"):
			t.Errorf("refusal names %+v, want the slot node-t keeps", we.HeldAfter)
		case terse && we.HeldAfter != nil:
			t.Errorf("terse refusal read the slots kept after a run: %+v", we.HeldAfter)
		}
	}
}
