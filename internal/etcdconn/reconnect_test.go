package etcdconn

import (
	"context"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/conch-project/conch/internal/etcdtest"
)

// While etcd is down, a client of New tries to connect again at least every
// reconnectMaxDelay (plus jitter), however long the outage: its port is taken over by a
// listener that counts the client's tries and closes each at once. gRPC's default back-off
// grows from 1 s by 1.6 times per try (5 tries in the first 12 s, then 10 s and more apart, up
// to 120 s). Once etcd is back, the client is connected again within about that bound
// (asserted: 3 s). The figures are printed.
func TestReconnectWithinBound(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv := etcdtest.Start(t)
	c, err := New(context.Background(), Settings{Endpoints: []string{srv.Endpoint}, EndpointsFrom: "the test", DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Get(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	var ln net.Listener
	for range 100 { // the port may linger a moment after the server's close
		if ln, err = net.Listen("tcp", u.Host); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	var tries atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			tries.Add(1)
			conn.Close()
		}
	}()
	const outage = 12 * time.Second
	time.Sleep(outage) // the outage itself: the client's tries are counted meanwhile
	ln.Close()
	n := tries.Load()
	t.Logf("%d tries to connect in %v of outage", n, outage)
	if min := int64(outage / (reconnectMaxDelay + reconnectMaxDelay/5)); n < min {
		t.Errorf("%d tries to connect in %v, want %d at least: the back-off is not capped at %v", n, outage, min, reconnectMaxDelay)
	}
	srv.Revive(t)
	back := time.Now()
	conn := c.ActiveConnection()
	for conn.GetState() != connectivity.Ready {
		if time.Since(back) > time.Minute {
			t.Fatalf("not connected a minute after etcd's return (state %v)", conn.GetState())
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(back)
	t.Logf("connected again %v after etcd's return", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("connected again only %v after etcd's return: the reconnect back-off is not capped", took)
	}
}
