package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/polltest"
)

// KeysUnder returns the number of keys under prefix now, read with c in one count-only
// read bounded by 10 s. A failed read fails t (from the test's goroutine only).
func KeysUnder(t testing.TB, c *clientv3.Client, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// WaitKeys polls (polltest.Until) until exactly n keys are under prefix, and fails t when
// within passes first. A failed read counts as not yet: the server may be coming back.
func WaitKeys(t testing.TB, c *clientv3.Client, prefix string, n int64, within time.Duration) {
	t.Helper()
	polltest.Until(t, within, "keys under "+prefix, func() bool {
		resp, err := c.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == n
	})
}
