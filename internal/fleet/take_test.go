package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TakeHeld's rules in order (D19), on a real etcd: a free slot is taken held after a run
// on a lease of the hold that nobody keeps alive, with the node, via and until in its
// record; the node asking again gets its slot untouched; another node finds the
// semaphore full, naming the holder; a pause refuses before the count; ReleaseHeld frees
// it at once (D14).
func TestTakeHeld(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	ctx := t.Context()
	rec := schema.Record{PID: 4242}
	t1, err := TakeHeld(ctx, c, "reboot", 1, "node-a", time.Hour, rec)
	if err != nil || t1.Result != TakeGranted {
		t.Fatalf("first take: %+v %v", t1, err)
	}
	resp, err := c.Get(ctx, t1.Slot.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the slot's key: %v %v", resp, err)
	}
	r := schema.DecodeRecord(resp.Kvs[0].Value)
	if !r.IsHeldAfter() || r.Host != "node-a" || r.HeldUntil == nil || r.PID != 4242 {
		t.Errorf("record %+v", r)
	}
	if resp.Kvs[0].Lease != int64(t1.Slot.Lease) || schema.LeaseKey(schema.Prefix("reboot", 1), t1.Slot.Lease) != t1.Slot.Key {
		t.Errorf("key %s on lease %x, want a key named after its lease %x", t1.Slot.Key, resp.Kvs[0].Lease, t1.Slot.Lease)
	}
	ttl, err := c.TimeToLive(ctx, t1.Slot.Lease)
	if err != nil || ttl.GrantedTTL != 3600 {
		t.Errorf("the hold's lease: %+v %v", ttl, err)
	}
	t2, err := TakeHeld(ctx, c, "reboot", 1, "node-a", time.Hour, rec)
	if err != nil || t2.Result != TakeAlreadyHeld || t2.Slot.Key != t1.Slot.Key || !t2.Slot.Until.Equal(t1.Slot.Until) {
		t.Errorf("second take by the holder: %+v %v", t2, err)
	}
	t3, err := TakeHeld(ctx, c, "reboot", 1, "node-b", time.Hour, rec)
	if err != nil || t3.Result != TakeFull || len(t3.Holders) != 1 || t3.Holders[0].Node != "node-a" || !t3.Holders[0].HeldAfter {
		t.Errorf("another node: %+v %v", t3, err)
	}
	if _, _, err := SetPause(ctx, c, "reboot", 1, "ops@x", "freeze"); err != nil {
		t.Fatal(err)
	}
	if t4, err := TakeHeld(ctx, c, "reboot", 1, "node-b", time.Hour, rec); err != nil || t4.Result != TakePaused || t4.Pause.Reason != "freeze" {
		t.Errorf("paused: %+v %v", t4, err)
	}
	if rel, err := ReleaseHeld(ctx, c, "reboot", 1, "node-a"); err != nil || len(rel.Freed) != 1 {
		t.Fatalf("release: %v %v", rel, err)
	}
	if n := etcdtest.KeysUnder(t, c, schema.Prefix("reboot", 1)); n != 0 {
		t.Errorf("%d keys after the release", n)
	}
	if _, err := TakeHeld(ctx, c, "reboot", 1, "0123456789abcdef", time.Hour, rec); err == nil {
		t.Error("a node named like a lease ID was taken")
	}
}

// Concurrent takes by many nodes never exceed the capacity, nor give one node two slots;
// no lease is left without a key (each lost write revokes its own).
func TestTakeHeldConcurrent(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	ctx := t.Context()
	before, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Take, 40)
	for i := range 40 {
		go func() {
			tk, err := TakeHeld(context.Background(), c, "reboot", 3, []string{"n1", "n2", "n3", "n4", "n5"}[i%5], time.Hour, schema.Record{PID: 1})
			if err != nil {
				t.Error(err)
			}
			done <- tk
		}()
	}
	granted := 0
	for range 40 {
		if (<-done).Result == TakeGranted {
			granted++
		}
	}
	resp, err := c.Get(ctx, schema.Prefix("reboot", 3), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, kv := range resp.Kvs {
		nodes[schema.DecodeRecord(kv.Value).Host] = true
	}
	if granted != 3 || len(resp.Kvs) != 3 || len(nodes) != 3 {
		t.Errorf("%d granted, %d keys for %d nodes: want 3 of each", granted, len(resp.Kvs), len(nodes))
	}
	after, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Leases)-len(before.Leases) != 3 {
		t.Errorf("%d leases more than before, want the 3 slots' only", len(after.Leases)-len(before.Leases))
	}
}
