package etcdconn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
)

// New gives a ready client for a live etcd, and otherwise an error of the class its caller
// maps: ErrUnreachable for no answer, ErrTLS for a TLS set-up that can never work.
func TestNewClassifies(t *testing.T) {
	srv := etcdtest.Start(t)
	c, err := New(context.Background(), Settings{Endpoints: []string{srv.Endpoint}, EndpointsFrom: "the test", DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("live etcd: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "k"); err != nil {
		t.Fatalf("a read on the client New gave: %v", err)
	}
	c.Close()

	_, err = New(context.Background(), Settings{Endpoints: []string{etcdtest.UnusedEndpoint(t)}, EndpointsFrom: "the test", DialTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTLS) {
		t.Errorf("nothing listening: %v, want ErrUnreachable", err)
	}
	empty := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(empty, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Settings{Endpoints: []string{"https://127.0.0.1:1"}, EndpointsFrom: "the test", CACert: empty, DialTimeout: 10 * time.Second})
	if !errors.Is(err, ErrTLS) || errors.Is(err, ErrUnreachable) {
		t.Errorf("a CA file without certificates: %v, want ErrTLS", err)
	}
}
