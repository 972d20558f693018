package sema

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A key found deleted once the lease's deadline on our clock has passed went with the
// expired lease (D7d); before the deadline someone deleted it.
func TestGoneErrAfterDeadline(t *testing.T) {
	t.Parallel()
	l := &lease{ttl: 2 * time.Second, confirmed: time.Now().Add(-3 * time.Second)}
	h := &Holder{l: l, key: "/conch/v1/sema/x/1/k"}
	if err := h.goneErr(); !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrKeyDeleted) || !strings.Contains(err.Error(), "the lease expired") {
		t.Errorf("past the deadline: %v, want the lease's expiry", err)
	}
	l.confirmed = time.Now()
	if err := h.goneErr(); !errors.Is(err, ErrKeyDeleted) || errors.Is(err, ErrLeaseLost) {
		t.Errorf("before the deadline: %v, want key deleted", err)
	}
}

// A waiter's lease lost although its deadline on our clock has not passed: etcd, stopped,
// answered a keep-alive sent during its stall when it resumed (so the deadline moved on),
// then expired the lease, last renewed more than a TTL before. The loss blames etcd's
// silence (D7h), not a bare "lease lost"; a confirmation within the TTL again clears it.
func TestLostPlaceAfterEtcdSilence(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := &lease{ttl: 3 * time.Second, waitEvery: 500 * time.Millisecond, confirmed: now.Add(-5 * time.Second)}
	l.sendGap = 400 * time.Millisecond // conch sent on time all along
	l.confirm(now.Add(-500 * time.Millisecond))
	err := l.lostPlace("/conch/v1/sema/x/1/k", ErrLeaseLost)
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "etcd stopped answering") {
		t.Errorf("lost after a 4.5 s silence of etcd under a 3 s TTL: %v, want it to blame etcd's silence", err)
	}
	l.confirm(now)
	if err := l.lostPlace("/conch/v1/sema/x/1/k", ErrLeaseLost); strings.Contains(err.Error(), "etcd stopped answering") {
		t.Errorf("lost after a confirmation within the TTL: %v, want no blame on a silence that ended", err)
	}
	l.confirmed, l.sendGap = now.Add(-5*time.Second), 3*time.Second // conch itself was stalled
	l.confirm(now.Add(-500 * time.Millisecond))
	if err := l.lostPlace("/conch/v1/sema/x/1/k", ErrLeaseLost); strings.Contains(err.Error(), "etcd stopped answering") {
		t.Errorf("lost after conch's own stall: %v, want no blame on etcd", err)
	}
}
