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
