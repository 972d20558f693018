package who

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema"
)

// testTimeout bounds every wait of these tests: a loaded CI machine can be slow.
const testTimeout = 60 * time.Second

func startEtcd(t *testing.T) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	return srv, srv.Client(t)
}

// newSem is sema.New with the tests' short TTL and generous connect timeout.
func newSem(t *testing.T, c *clientv3.Client, name string, max int, opts sema.Options) *sema.Semaphore {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = testTimeout
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

func mustAcquire(t *testing.T, s *sema.Semaphore) *sema.Holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	h, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return h
}

type acquired struct {
	h   *sema.Holder
	err error
}

// acquireAsync starts Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, s *sema.Semaphore) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		h, err := s.Acquire(ctx)
		ch <- acquired{h, err}
	}()
	return ch
}

func release(t *testing.T, h *sema.Holder) {
	t.Helper()
	if err := h.Release(t.Context()); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// list is the entries of the semaphore name (every one when name is ""), as the one read
// behind every listing (snapshot) gives them.
func list(t *testing.T, c *clientv3.Client, name string) []Entry {
	t.Helper()
	l, err := snapshot(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Entries
}
