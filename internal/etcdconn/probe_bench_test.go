package etcdconn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// benchProbe measures what the endpoint probe (probeEndpoints) adds to each
// start of conch, against a real etcd on loopback: one TCP connection
// (BenchmarkProbePlain), or one with a TLS 1.2 handshake and a client
// certificate (BenchmarkProbeTLS).
func benchProbe(b *testing.B, srv *etcdtest.Server, s Settings) {
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
	benchProbe(b, srv, Settings{Endpoints: []string{srv.Endpoint}})
}

func BenchmarkProbeTLS(b *testing.B) {
	srv, s := startTLSBench(b)
	benchProbe(b, srv, s)
}

// startTLSBench starts an etcd that wants TLS with a client certificate, and returns it with
// conch's settings for it.
func startTLSBench(b *testing.B) (*etcdtest.Server, Settings) {
	dir := b.TempDir()
	ca := etcdtest.NewCA(b, dir, "ca")
	now := time.Now()
	srvCert, srvKey := ca.Leaf(b, dir, "server", etcdtest.Cert{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	cliCert, cliKey := ca.Leaf(b, dir, "client", etcdtest.Cert{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	srv := etcdtest.StartConfig(b, etcdtest.Config{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.File})
	return srv, Settings{Endpoints: []string{srv.Endpoint}, CACert: ca.File, Cert: cliCert, Key: cliKey}
}

// BenchmarkFirstRequest times a start's connection up to its first answer, a LeaseGrant, as
// conch does it (New: the probe beside clientv3's dial, mode=overlapped) and as
// it did before (mode=sequential: the probe, then the dial), with TLS and a client certificate
// and in plain TCP.
func BenchmarkFirstRequest(b *testing.B) {
	for _, tls := range []bool{false, true} {
		for _, overlapped := range []bool{false, true} {
			name := map[bool]string{false: "plain", true: "tls"}[tls] + "/mode=" + map[bool]string{false: "sequential", true: "overlapped"}[overlapped]
			b.Run(name, func(b *testing.B) {
				var s Settings
				if tls {
					_, s = startTLSBench(b)
				} else {
					s = Settings{Endpoints: []string{etcdtest.Start(b).Endpoint}}
				}
				s.DialTimeout = 5 * time.Second
				for range b.N {
					c, err := firstRequestClient(s, overlapped)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := c.Grant(b.Context(), 10); err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
			})
		}
	}
}

// firstRequestClient is New, or with overlapped false the probe and then the dial.
func firstRequestClient(s Settings, overlapped bool) (*clientv3.Client, error) {
	if overlapped {
		return New(context.Background(), s)
	}
	tc, err := tlsConfig(s, time.Now())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.DialTimeout)
	defer cancel()
	if err := probeEndpoints(ctx, s, tc); err != nil {
		return nil, err
	}
	d := dial(clientConfig(s, tc, context.Background()))
	return d.c, d.err
}
