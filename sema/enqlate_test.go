package sema

import (
	"context"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An enqueue whose answer was lost and whose Txn commits only after the read that follows
// (etcd had it in flight: the nemesis saw it under a partition between two members) keeps
// its place (D7j): the write after the read finds the key there, and the key, on our lease,
// is ours: it is read again and adopted, not taken for someone else's ("existed before we
// wrote it") and given up for a new key at the back. The first Txn's answer is lost and its
// key taken away by the enqueueAnswered seam; the readBack seam puts it back, on our lease,
// between the read and the second write.
func TestEnqueueLateCommitKeepsPlace(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	holder := mustAcquire(t, newSem(t, c, "late", 1, Options{}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var mu sync.Mutex
	var events []Event
	first := newSem(t, c, "late", 1, Options{OnEvent: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	var lost, back sync.Once
	var kv struct {
		key, value string
		lease      clientv3.LeaseID
	}
	SetEnqueueAnswered(first, func(key string) error {
		var err error
		lost.Do(func() {
			resp, gerr := c.Get(ctx, key)
			if gerr != nil || len(resp.Kvs) != 1 {
				t.Errorf("the enqueue committed but %s reads %v, %v", key, resp, gerr)
				return
			}
			kv.key, kv.value, kv.lease = key, string(resp.Kvs[0].Value), clientv3.LeaseID(resp.Kvs[0].Lease)
			if _, derr := c.Delete(ctx, key); derr != nil { // not committed yet, as the read will see
				t.Error(derr)
			}
			err = status.Error(codes.Unavailable, "the answer was lost on the way back")
		})
		return err
	})
	SetReadBack(first, func(key string) {
		back.Do(func() { // the lost Txn commits now, after the read
			if _, err := c.Put(ctx, kv.key, kv.value, clientv3.WithLease(kv.lease)); err != nil {
				t.Error(err)
			}
		})
	})
	got := acquireAsync(ctx, first)
	waitQueued(t, c, first, 2)
	release(t, holder)
	a := <-got
	if a.err != nil {
		t.Fatalf("the waiter whose Txn committed late: %v", a.err)
	}
	defer release(t, a.h)
	if a.h.Key() != kv.key {
		t.Errorf("held %s, want the key of the late Txn, %s", a.h.Key(), kv.key)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Kind == Reentering {
			t.Errorf("the waiter re-entered the queue (%v); it must adopt its key", e.Err)
		}
	}
}
