package sema

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
)

const testTimeout = 60 * time.Second

func newSem(t *testing.T, c *clientv3.Client, name string, max int, opts Options) *Semaphore {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.ConnectTimeout == 0 { // a loaded CI machine can be slow; the default is for the CLI
		opts.ConnectTimeout = testTimeout
	}
	if opts.FenceMargin == 0 {
		opts.FenceMargin = time.Second
	}
	s, err := New(c, name, max, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAcquire(t *testing.T, s *Semaphore) *Holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	h, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire %s: %v", s.name, err)
	}
	return h
}

// acquireAsync starts Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, s *Semaphore) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		h, err := s.Acquire(ctx)
		ch <- acquired{h, err}
	}()
	return ch
}

type acquired struct {
	h   *Holder
	err error
}

// keyCount returns the number of keys under s's prefix now, one read: for
// checks that a key is gone at once, not at lease expiry (D3).
func keyCount(t *testing.T, c *clientv3.Client, s *Semaphore) int64 {
	t.Helper()
	return etcdtest.KeysUnder(t, c, s.prefix)
}

// waitQueued polls until the semaphore has n keys.
func waitQueued(t *testing.T, c *clientv3.Client, s *Semaphore, n int) {
	t.Helper()
	etcdtest.WaitKeys(t, c, s.prefix, int64(n), testTimeout)
}

func startEtcd(t *testing.T) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	return srv, srv.Client(t)
}

func release(t *testing.T, h *Holder) {
	t.Helper()
	if err := h.Release(t.Context()); err != nil {
		t.Fatalf("release: %v", err)
	}
}
