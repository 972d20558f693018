package sema

import (
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/polltest"
)

// D15: no marker at first; MarkOnce writes one, fenced on our key, bound to
// a lease of the period, which the next holder reads with the node, the
// run's token and the time left; it is gone when the period ends. A holder
// whose key is gone writes none.
func TestOnceMarker(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "once", 1, Options{})
	h := mustAcquire(t, s)
	if m, err := h.ReadOnce(t.Context()); err != nil || m != nil {
		t.Fatalf("ReadOnce before any run: %+v %v", m, err)
	}
	now := time.Now().UTC()
	if err := h.MarkOnce(t.Context(), 2*time.Second, OnceRecord{Node: "n1", Start: now, End: now}); err != nil {
		t.Fatal(err)
	}
	rev := h.Rev()
	release(t, h)
	h = mustAcquire(t, s)
	m, err := h.ReadOnce(t.Context())
	if err != nil || m == nil || m.Node != "n1" || m.Rev != rev || m.Left <= 0 || m.Left > 2*time.Second || m.Err != nil {
		t.Fatalf("ReadOnce in the period: %+v %v", m, err)
	}
	polltest.Until(t, testTimeout, "the marker to end with its period", func() bool {
		m, err = h.ReadOnce(t.Context())
		return err == nil && m == nil
	})
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	if err := h.MarkOnce(t.Context(), time.Hour, OnceRecord{Node: "n1", End: now}); !errors.Is(err, ErrKeyDeleted) {
		t.Fatalf("MarkOnce with our key gone: %v, want ErrKeyDeleted", err)
	}
	if resp, err := c.Get(t.Context(), OnceKey("once", 1)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("marker written by a holder that lost its key: %v %v", resp, err)
	}
	_ = h.Release(t.Context())
}

// D15 against a hand-written marker: garbage counts as present and says
// what it is; one without a lease has Left -1.
func TestOnceMarkerGarbage(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	if _, err := c.Put(t.Context(), OnceKey("onceg", 1), "garbage"); err != nil {
		t.Fatal(err)
	}
	h := mustAcquire(t, newSem(t, c, "onceg", 1, Options{}))
	defer release(t, h)
	m, err := h.ReadOnce(t.Context())
	if err != nil || m == nil || m.Err == nil || m.Raw != "garbage" || m.Left != -1 {
		t.Fatalf("ReadOnce of a garbage marker: %+v %v", m, err)
	}
}
