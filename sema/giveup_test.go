package sema

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/conch-project/conch/internal/etcdtest"
)

// A waiter whose --wait runs out while etcd hangs returns
// within the wait plus giveUpTimeout (the give-up work shares one budget:
// giveUpWithin), with ErrUnavailable (69): its revoke could not be confirmed.
// Before, three bounded steps in a row made a 3 s wait last 6 s.
func TestWaitBoundWhileEtcdHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv, c := startEtcd(t)
	f := etcdtest.NewFreezer(t, srv.Endpoint)
	pc, err := clientv3.New(clientv3.Config{Endpoints: []string{f.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	holder := newSem(t, c, "hang", 1, Options{})
	h := mustAcquire(t, holder)
	defer release(t, h)
	// The freeze must come once the waiter has its enqueue's answer: a freeze between the
	// Txn's commit (its key visible) and the answer is etcd hanging at start, which gets
	// ConnectTimeout whatever the wait says (D3), not the wait's bound tested here.
	enqueued := make(chan struct{})
	var once sync.Once
	w := newSem(t, pc, "hang", 1, Options{ConnectTimeout: 5 * time.Second, OnEvent: func(e Event) {
		if e.Kind == Enqueued {
			once.Do(func() { close(enqueued) })
		}
	}})
	const wait = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	start := time.Now()
	ch := acquireAsync(ctx, w)
	waitQueued(t, c, holder, 2)
	select {
	case <-enqueued:
	case <-time.After(testTimeout):
		t.Fatal("the waiter never had its enqueue's answer")
	}
	f.Freeze()
	var r acquired
	select {
	case r = <-ch:
	case <-time.After(testTimeout):
		t.Fatal("Acquire did not return")
	}
	took := time.Since(start)
	if !errors.Is(r.err, ErrUnavailable) {
		t.Fatalf("Acquire = %v, %v; want ErrUnavailable", r.h, r.err)
	}
	// 0.7 s of slack for a loaded machine; the overrun this catches was 3 s
	if limit := wait + giveUpTimeout + 700*time.Millisecond; took > limit {
		t.Fatalf("--wait %v returned after %v, more than %v", wait, took, limit)
	}
}
