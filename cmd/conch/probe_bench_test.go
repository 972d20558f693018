package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
)

// benchProbe measures what the endpoint probe (probeEndpoints) adds to each
// start of conch, against a real etcd on loopback: one TCP connection
// (BenchmarkProbePlain), or one with a TLS 1.2 handshake and a client
// certificate (BenchmarkProbeTLS).
func benchProbe(b *testing.B, srv *etcdtest.Server, s connSettings) {
	b.Helper()
	tc, err := tlsConfig(s, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := probeEndpoints(ctx, s, tc); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}

func BenchmarkProbePlain(b *testing.B) {
	srv := etcdtest.Start(b)
	benchProbe(b, srv, connSettings{Endpoints: []string{srv.Endpoint}})
}

func BenchmarkProbeTLS(b *testing.B) {
	dir := b.TempDir()
	ca := newTestCA(b, dir, "ca")
	now := time.Now()
	srvCert, srvKey := ca.leaf(b, dir, "server", now.Add(-time.Hour), now.Add(time.Hour), []net.IP{net.ParseIP("127.0.0.1")}, nil)
	cliCert, cliKey := ca.leaf(b, dir, "client", now.Add(-time.Hour), now.Add(time.Hour), nil, nil)
	srv := etcdtest.StartConfig(b, etcdtest.Config{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.file})
	benchProbe(b, srv, connSettings{Endpoints: []string{srv.Endpoint}, CACert: ca.file, Cert: cliCert, Key: cliKey})
}
