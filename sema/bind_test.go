package sema

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Bind: one context whose cause is whichever came first, the parent's (a signal, say) or
// the slot's loss, as the holder's own error.
func TestBindCause(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "bind", 1, Options{})

	h := mustAcquire(t, s)
	parentErr := errors.New("stop requested")
	parent, stopParent := context.WithCancelCause(t.Context())
	ctx, unbind := h.Bind(parent)
	stopParent(parentErr)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != parentErr {
		t.Fatalf("parent ended first: cause %v, want %v", cause, parentErr)
	}
	unbind()
	release(t, h)

	h = mustAcquire(t, s)
	ctx, unbind = h.Bind(t.Context())
	defer unbind()
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(testTimeout):
		t.Fatal("bound context not ended by the key's deletion")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrKeyDeleted) || cause != context.Cause(h.Context()) {
		t.Fatalf("slot lost first: cause %v, want the holder's %v", cause, context.Cause(h.Context()))
	}
	h.Release(t.Context())
}

// WaitError matches the sentinel of its verdict, so errors.Is callers keep working (D3).
func TestWaitErrorIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    *WaitError
		want error
		not  []error
	}{
		{&WaitError{Name: "x", Max: 1}, ErrTimeout, []error{ErrNoSlot, ErrUnavailable}},
		{&WaitError{Name: "x", Max: 1, Nonblock: true}, ErrNoSlot, []error{ErrTimeout, ErrUnavailable}},
		{&WaitError{Name: "x", Max: 1, Unreachable: true, Err: context.DeadlineExceeded}, ErrUnavailable, []error{ErrTimeout, ErrNoSlot}},
	} {
		if !errors.Is(tc.v, tc.want) {
			t.Errorf("%v: not %v", tc.v, tc.want)
		}
		for _, n := range tc.not {
			if errors.Is(tc.v, n) {
				t.Errorf("%v: is %v", tc.v, n)
			}
		}
	}
	if v := (&WaitError{Name: "x", Unreachable: true, Err: context.DeadlineExceeded}); !errors.Is(v, context.DeadlineExceeded) {
		t.Errorf("%v does not wrap its request's error", v)
	}
}
