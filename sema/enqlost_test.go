package sema

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An enqueue whose Txn committed but whose answer was lost keeps its place
// (D2): the waiter reads its own key before writing again and adopts it at its
// create revision, so a waiter that enqueued after the lost answer stays
// behind it. The answer is lost by the enqueueAnswered seam after etcd
// committed the Txn; the later waiter enqueues in that gap.
func TestEnqueueAnswerLostKeepsPlace(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	newS := func() *Semaphore { return newSem(t, c, "lost", 1, Options{}) }
	holder := mustAcquire(t, newS())
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()

	var events []Event
	var mu sync.Mutex
	first := newSem(t, c, "lost", 1, Options{OnEvent: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	later := newS()
	var once sync.Once
	lostDone := make(chan struct{}) // the seam has let the later waiter enqueue
	var laterCh <-chan acquired
	var firstKey string
	var firstRev int64
	SetEnqueueAnswered(first, func(key string) error {
		lost := false
		once.Do(func() {
			defer close(lostDone)
			lost = true
			resp, err := c.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Errorf("the enqueue committed but %s reads %v, %v", key, resp, err)
				return
			}
			firstKey, firstRev = key, resp.Kvs[0].CreateRevision
			laterCh = acquireAsync(ctx, later) // enqueues behind the committed key
			for deadline := time.Now().Add(testTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if r, err := c.Get(ctx, later.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil && r.Count == 3 {
					return
				}
			}
			r, err := c.Get(ctx, later.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			t.Errorf("the later waiter never enqueued: %v %v", r, err)
		})
		if lost {
			return status.Error(codes.Unavailable, "the answer was lost on the way back")
		}
		return nil
	})
	firstCh := acquireAsync(ctx, first)
	select {
	case <-lostDone:
	case <-ctx.Done():
		t.Fatal("the first waiter's enqueue never committed")
	}
	waitQueued(t, c, first, 3) // the first waiter's key is still there, behind the holder
	release(t, holder)

	select {
	case got := <-firstCh:
		if got.err != nil {
			t.Fatalf("the waiter whose enqueue answer was lost: %v", got.err)
		}
		defer release(t, got.h)
		if got.h.Key() != firstKey || got.h.Rev() != firstRev {
			t.Fatalf("held %s at %d, want the key written by the lost Txn, %s at %d", got.h.Key(), got.h.Rev(), firstKey, firstRev)
		}
	case got := <-laterCh:
		if got.h != nil {
			defer release(t, got.h)
		}
		t.Fatalf("the waiter that enqueued after the lost answer was served first (%v): the place was lost", got.err)
	case <-time.After(testTimeout):
		t.Fatal("no waiter was served after the holder released")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Kind == Reentering {
			t.Fatalf("the waiter re-entered the queue (%v); it must adopt its key", e.Err)
		}
	}
	cancel()
	if got := <-laterCh; got.h != nil {
		release(t, got.h)
	}
}
