package sema

import (
	"errors"
	"testing"
	"time"
)

// D7i: a waiter promoted on a stale confirmation while etcd does not answer (down, here,
// and back 1.5 s later with its data) does not give up its live lease on the first
// unanswered keep-alive: it confirms it again until etcd answers, and then holds. A lease
// etcd no longer knows still ends it at once (ErrLeaseLost).
func TestPromotionConfirmRetried(t *testing.T) {
	srv, c := startEtcd(t)
	l, err := grantLease(t.Context(), c, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	l.setWaitInterval(time.Hour) // the slowest waiting cadence, TTL/3: no keep-alive for 6 s
	const margin = 18 * time.Second
	for time.Until(l.confirmedAt().Add(fenceDelay(l.ttl, margin))) >= keepAliveInterval(l.ttl, true) {
		time.Sleep(20 * time.Millisecond) // poll: the confirmation goes stale after 1 s
	}
	srv.Kill()
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(1500 * time.Millisecond) // the outage itself
		srv.Revive(t)
	}()
	err = l.startFencing(t.Context(), margin, nil)
	<-back
	if err != nil {
		t.Fatalf("promotion while etcd was down 1.5 s: %v, want the lease confirmed once etcd answered", err)
	}
	if _, err := c.Revoke(t.Context(), l.id); err != nil {
		t.Fatal(err)
	}
	l2, err := grantLease(t.Context(), c, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.stop()
	if _, err := c.Revoke(t.Context(), l2.id); err != nil {
		t.Fatal(err)
	}
	if err := l2.confirmOnce(t.Context(), time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("confirming a revoked lease: %v, want ErrLeaseLost", err)
	}
}
