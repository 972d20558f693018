// Package sematest holds what the tests of the layers over sema (the listing, the fleet
// rules) need to run the recipe against a real etcd: a semaphore with the tests' short TTL,
// an acquire and a release that fail the test on error, and an acquire on a goroutine of its
// own. sema's own tests keep theirs: they are inside the package and cannot import this one.
package sematest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema"
)

// Timeout bounds every wait of these tests: a loaded CI machine can be slow.
const Timeout = 60 * time.Second

// StartEtcd starts an in-process etcd for t (stopped at its end) and returns it with a
// client of it.
func StartEtcd(t *testing.T) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	return srv, srv.Client(t)
}

// NewSem is sema.New with the tests' defaults where opts leaves them zero: a 5 s TTL, a
// connect timeout of Timeout and a 1 s fence margin. It fails t on error.
func NewSem(t *testing.T, c *clientv3.Client, name string, max int, opts sema.Options) *sema.Semaphore {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = Timeout
	}
	if opts.FenceMargin == 0 {
		opts.FenceMargin = time.Second
	}
	s, err := sema.New(c, name, max, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustAcquire acquires s within Timeout, failing t on error.
func MustAcquire(t *testing.T, s *sema.Semaphore) *sema.Holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	h, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return h
}

// Release releases h, failing t on error.
func Release(t *testing.T, h *sema.Holder) {
	t.Helper()
	if err := h.Release(t.Context()); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// Acquired is what an Acquire started by AcquireAsync returned.
type Acquired struct {
	H   *sema.Holder
	Err error
}

// AcquireAsync starts s.Acquire(ctx) on a goroutine of its own; its result arrives on the
// channel (buffered: it never blocks the goroutine).
func AcquireAsync(ctx context.Context, s *sema.Semaphore) <-chan Acquired {
	ch := make(chan Acquired, 1)
	go func() {
		h, err := s.Acquire(ctx)
		ch <- Acquired{h, err}
	}()
	return ch
}
