// Package etcdtest starts a real, throw-away etcd server in the test process
// (go.etcd.io/etcd/server/v3/embed) on loopback with random ports, for
// integration tests of conch. No mocks: the server is the real etcd.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/conch-project/conch/internal/metrics"
)

// Fast raft timers, as measured in TESTING-INFRA.md: ready in ~100 ms, and
// with ElectionMs <= 666 the server grants 1 s leases, so lease-expiry tests
// stay short.
const (
	tickMs     = 10
	electionMs = 100
	readyWait  = 30 * time.Second
)

// Server is one running etcd member. Endpoint is its client URL
// (http://127.0.0.1:PORT).
type Server struct {
	Endpoint string
	Metrics  string // http://127.0.0.1:PORT/metrics
	// ClientTLS is what Client dials with (nil: plaintext); a test of a TLS
	// server sets it before calling Client.
	ClientTLS *tls.Config
	// Username, Password: Client logs in with them when set (auth enabled).
	Username, Password string
	etcd               *embed.Etcd
	cfg                *embed.Config // what started etcd: Restart starts it again
	stop               sync.Once
	// down is set by Kill and cleared by Revive: a killed server is already
	// closed, and closing it again at Stop would panic.
	down bool
}

// Config changes the server StartConfig starts; the zero value is Start's:
// plaintext without auth.
type Config struct {
	// CertFile and KeyFile are the server's certificate and key: the client
	// URL is then https://127.0.0.1:PORT.
	CertFile, KeyFile string
	// ClientCAFile, with CertFile: require client certificates signed by it.
	ClientCAFile string
	// AuthTokenTTL is the simple auth token's TTL in seconds (0: etcd's 300).
	AuthTokenTTL uint
	// ElectionMs is the election timeout in milliseconds (0: the fast 100 ms). etcd's
	// minimum lease TTL is ceil(1.5 x ElectionMs) in whole seconds: 1000 makes it 2 s, so
	// a 1 s lease is raised, as on a stock etcd.
	ElectionMs uint
}

// StartConfig is Start with the server configured by c (TLS, auth token TTL).
func StartConfig(t testing.TB, c Config) *Server {
	t.Helper()
	return startWith(t, func(cfg *embed.Config) {
		if c.CertFile != "" {
			cfg.ListenClientUrls[0].Scheme, cfg.AdvertiseClientUrls[0].Scheme = "https", "https"
			cfg.ClientTLSInfo = transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.ClientCAFile, ClientCertAuth: c.ClientCAFile != ""}
		}
		if c.AuthTokenTTL > 0 {
			cfg.AuthTokenTTL = c.AuthTokenTTL
		}
		if c.ElectionMs > 0 {
			cfg.ElectionMs = c.ElectionMs
		}
	})
}

// Start starts a single-member etcd with its data in t.TempDir() and stops it
// in t.Cleanup. Each attempt waits up to 30 s for the server to be ready; a
// start that fails (a random port taken between probe and bind) is retried
// on new ports, 5 attempts in all, then the test fails.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, nil)
}

// startWith is Start with tweak applied to the configuration once its
// ports are chosen; tweak may be nil.
func startWith(t testing.TB, tweak func(*embed.Config)) *Server {
	t.Helper()
	var lastErr error
	for range 5 { // a random port can be taken between probe and bind
		s, err := start(t.TempDir(), tweak)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("etcdtest: cannot start etcd: %v", lastErr)
	return nil
}

// StartMain is Start for a TestMain, which has no testing.T: the data goes in a fresh
// temporary directory, and stop stops the server and removes it. It retries like Start.
func StartMain() (*Server, func(), error) {
	var lastErr error
	for range 5 { // a random port can be taken between probe and bind
		dir, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			return nil, nil, err
		}
		// No gRPC gateway: its websocket proxy reads os.Stderr from a serving goroutine, which
		// races with testing.M.Run replacing os.Stderr under -json (seen in CI as a data race
		// in whatever test ran first). Clients and /metrics do not use it.
		s, err := start(dir, func(c *embed.Config) { c.EnableGRPCGateway = false })
		if err == nil {
			return s, func() { s.Stop(); os.RemoveAll(dir) }, nil
		}
		os.RemoveAll(dir)
		lastErr = err
	}
	return nil, nil, fmt.Errorf("etcdtest: cannot start etcd: %w", lastErr)
}

func start(dir string, tweak func(*embed.Config)) (*Server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	cu := mustURL(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
	pu := mustURL(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	mu := mustURL(fmt.Sprintf("http://127.0.0.1:%d", ports[2]))
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	cfg.TickMs, cfg.ElectionMs = tickMs, electionMs
	cfg.UnsafeNoFsync = true
	// bcrypt's minimum cost: a login under the race detector on a loaded machine otherwise
	// takes seconds of server CPU, longer than a test's --dial-timeout (seen: 69 instead of 64).
	cfg.BcryptCost = 4 // bcrypt.MinCost
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenMetricsUrls = []url.URL{mu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if tweak != nil {
		tweak(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyWait):
		e.Server.HardStop()
		e.Close()
		return nil, fmt.Errorf("etcd not ready after %v", readyWait)
	}
	return &Server{Endpoint: cfg.AdvertiseClientUrls[0].String(), Metrics: cfg.ListenMetricsUrls[0].String() + "/metrics", etcd: e, cfg: cfg}, nil // the URLs as tweaked (StartCluster sets its own)
}

// Stop stops the server at once (HardStop, no leadership transfer) and
// releases its ports; closing the gRPC server can take a few seconds while
// client streams drain. It is safe to call more than once, concurrently.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.down {
			return
		}
		s.etcd.Server.HardStop()
		s.etcd.Close()
	})
}

// Client returns a client connected to s, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		TLS:         s.ClientTLS,
		Username:    s.Username,
		Password:    s.Password,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	if _, err := c.Get(ctx, "health"); err != nil {
		t.Fatalf("etcdtest: first request: %v", err)
	}
	return c
}

// Scrape reads the server's /metrics (see metrics.Samples), failing t if
// it cannot.
func (s *Server) Scrape(t testing.TB) metrics.Samples {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := metrics.Scrape(ctx, s.Metrics)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return m
}

// Revision returns the store's current revision.
func (s *Server) Revision() int64 { return s.etcd.Server.KV().Rev() }

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}

// UnusedEndpoint returns a loopback URL on which nothing listens (the port was
// just free), for "etcd unreachable" tests.
func UnusedEndpoint(t testing.TB) string {
	t.Helper()
	p, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", p[0])
}
