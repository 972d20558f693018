package sema

import (
	"errors"
	"testing"
	"time"
)

// A waiter promoted while its last confirmed keep-alive is old (the slow
// waiting cadence) must confirm the lease before it holds, instead of being
// fenced at once: found by the benchmark drain at high load (D7).
func TestHoldConfirmsStaleLease(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	l, err := grantLease(t.Context(), c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	l.mu.Lock()
	l.confirmed = time.Now().Add(-4 * time.Second) // fence point would already be past
	l.mu.Unlock()
	if err := l.startFencing(t.Context(), 2*time.Second, nil); err != nil {
		t.Fatalf("hold on a live lease with a stale confirmation: %v", err)
	}
	if until := time.Until(l.fenceAt()); until < keepAliveInterval(l.ttl, true) {
		t.Fatalf("fence point only %v away after hold", until)
	}
	select {
	case <-l.Done():
		t.Fatalf("lease failed right after hold: %v", l.Err())
	case <-time.After(1500 * time.Millisecond): // negative check over a few keep-alives
	}
}

func TestHoldOnRevokedLease(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	l, err := grantLease(t.Context(), c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	if _, err := c.Revoke(t.Context(), l.id); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.confirmed = time.Now().Add(-4 * time.Second)
	l.mu.Unlock()
	if err := l.startFencing(t.Context(), 2*time.Second, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("hold on a revoked lease: %v, want ErrLeaseLost", err)
	}
}
