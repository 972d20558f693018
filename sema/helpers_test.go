package sema

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
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

// setPause writes the pause key of (name, max) as an operator's pause does (D16; the layer
// above, internal/fleet, does it for the CLI), unless one is there: the pause in force and
// whether this call wrote it.
func setPause(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string) (schema.Pause, bool, error) {
	key := schema.PauseKey(name, max)
	p := schema.Pause{Name: name, Max: max, Key: key, V: schema.PauseVersion, Who: who, Since: time.Now().UTC().Truncate(time.Second), Reason: reason}
	b, err := json.Marshal(p)
	if err != nil {
		return schema.Pause{}, false, err
	}
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
	switch {
	case err != nil:
		return schema.Pause{}, false, err
	case resp.Succeeded:
		p.Rev = resp.Header.Revision
		return p, true, nil
	}
	return schema.DecodePause(resp.Responses[0].GetResponseRange().Kvs[0]), false, nil
}

// resume deletes the pause key of (name, max): the pause deleted and whether there was one.
func resume(ctx context.Context, c *clientv3.Client, name string, max int) (schema.Pause, bool, error) {
	resp, err := c.Delete(ctx, schema.PauseKey(name, max), clientv3.WithPrevKV())
	if err != nil || len(resp.PrevKvs) == 0 {
		return schema.Pause{}, false, err
	}
	return schema.DecodePause(resp.PrevKvs[0]), true, nil
}
