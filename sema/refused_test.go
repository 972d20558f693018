package sema

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A request etcd rejects for good (here: a read-only user) fails at once
// with ErrRefused, even with Nonblock, instead of retrying forever: found by
// the hostile test (D3: an exit with a reason, never a silent hang).
func TestRefusedRequestFailsFast(t *testing.T) {
	srv, c := startEtcd(t)
	ctx := t.Context()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.UserAdd(ctx, "ro", "ropw"); return err },
		func() error { _, err := c.RoleAdd(ctx, "readonly"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "readonly", schema.KeyRoot, clientv3.GetPrefixRangeEnd(schema.KeyRoot), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserGrantRole(ctx, "ro", "readonly"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	ro, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, Username: "ro", Password: "ropw",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, nonblock := range []bool{true, false} {
		s := newSem(t, ro, "ro", 1, Options{Nonblock: nonblock})
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		_, err := s.Acquire(actx)
		cancel()
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("nonblock=%v: %v, want ErrRefused", nonblock, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("nonblock=%v: refused after %v, want at once", nonblock, d)
		}
	}
}

func TestTTLAboveEtcdMaximumRefused(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "bigttl", 1, Options{TTL: 9000000001 * time.Second})
	if _, err := s.Acquire(t.Context()); !errors.Is(err, ErrRefused) {
		t.Fatalf("TTL above etcd's maximum: %v, want ErrRefused", err)
	}
}
