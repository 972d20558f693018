package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
)

// rawEnv is an env for srv without CONCH_ENDPOINTS: each run names its own
// endpoints and credentials; root is a client with every permission.
func rawEnv(t *testing.T, srv *etcdtest.Server, root *clientv3.Client) *env {
	t.Helper()
	e := &env{t: t, srv: srv, c: root, dir: t.TempDir()}
	conf := filepath.Join(e.dir, "conch.conf")
	if err := os.WriteFile(conf, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") && !strings.HasPrefix(kv, "ETCDCTL_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			e.vars = append(e.vars, kv)
		}
	}
	e.vars = append(e.vars, "CONCH_CONFIG="+conf)
	return e
}

// nothingHalfWritten fails t if any key under /conch/ or any lease is left
// (read as root: "nothing half-written").
func (e *env) nothingHalfWritten(what string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := e.keys("/conch/")
	leases, err := e.c.Leases(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if keys != 0 || len(leases.Leases) != 0 {
		e.t.Errorf("%s: %d keys under /conch/ and %d leases left", what, keys, len(leases.Leases))
	}
}

// A permanent TLS misconfiguration exits 64 with the x509 or
// handshake reason, without waiting for the dial timeout (30 s here), and
// writes nothing; the right set-up works. Certificates are made here.
func TestTLSMisconfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := etcdtest.NewCA(t, dir, "ca"), etcdtest.NewCA(t, dir, "other-ca")
	now := time.Now()
	day := 24 * time.Hour
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	srvCert, srvKey := ca.Leaf(t, dir, "server", etcdtest.Cert{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(day), IPs: loop})
	cliCert, cliKey := ca.Leaf(t, dir, "client", etcdtest.Cert{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(day)})
	oldCert, oldKey := ca.Leaf(t, dir, "expired-client", etcdtest.Cert{NotBefore: now.Add(-2 * day), NotAfter: now.Add(-day)})
	forCert, forKey := other.Leaf(t, dir, "foreign-client", etcdtest.Cert{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(day)})
	oldSrvCert, oldSrvKey := ca.Leaf(t, dir, "expired-server", etcdtest.Cert{NotBefore: now.Add(-2 * day), NotAfter: now.Add(-day), IPs: loop})
	noCA := filepath.Join(dir, "no-cert.pem")
	os.WriteFile(noCA, []byte("-----BEGIN NOTHING-----\n-----END NOTHING-----\n"), 0o644)

	srv := etcdtest.StartConfig(t, etcdtest.Config{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.File})
	srv.ClientTLS = etcdtest.ClientTLS(t, ca, cliCert, cliKey)
	oldSrv := etcdtest.StartConfig(t, etcdtest.Config{CertFile: oldSrvCert, KeyFile: oldSrvKey})
	e := rawEnv(t, srv, srv.Client(t))
	port := srv.Endpoint[strings.LastIndex(srv.Endpoint, ":")+1:]
	good := []string{"--cacert", ca.File, "--cert", cliCert, "--key", cliKey}
	for _, tc := range []struct {
		name   string
		ep     string
		tls    []string
		status int
		want   string
	}{
		{"right CA and client certificate", srv.Endpoint, good, 0, ""},
		{"wrong CA", srv.Endpoint, []string{"--cacert", other.File, "--cert", cliCert, "--key", cliKey}, 64, "x509: certificate signed by unknown authority"},
		{"wrong host name", "https://localhost:" + port, good, 64, "x509: certificate is not valid for any names, but wanted to match localhost"},
		{"expired server certificate", oldSrv.Endpoint, []string{"--cacert", ca.File}, 64, "x509: certificate has expired"},
		{"expired client certificate", srv.Endpoint, []string{"--cacert", ca.File, "--cert", oldCert, "--key", oldKey}, 64, "expired-client.pem: expired at"},
		{"missing client certificate", srv.Endpoint, []string{"--cacert", ca.File}, 64, "the server rejected the handshake"},
		{"client certificate of another CA", srv.Endpoint, []string{"--cacert", ca.File, "--cert", forCert, "--key", forKey}, 64, "the server rejected the handshake"},
		{"CA file without certificates", srv.Endpoint, []string{"--cacert", noCA}, 64, "holds no PEM certificate"},
		{"key of another certificate", srv.Endpoint, []string{"--cacert", ca.File, "--cert", cliCert, "--key", forKey}, 64, "private key does not match public key"},
		{"http:// with TLS files", "http://127.0.0.1:" + port, good, 64, "is plaintext, but TLS files are set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"sema", "tls", "--max", "1", "--dial-timeout", "30s", "--endpoints", tc.ep}, tc.tls...)
			start := time.Now()
			r := e.run(append(args, "--", "true")...)
			if r.status != tc.status || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%v\nwant status %d and %q", r, tc.status, tc.want)
			}
			if took := time.Since(start); tc.status != 0 && took > 20*time.Second {
				t.Errorf("took %v: a permanent TLS error must not wait for the dial timeout", took)
			}
			e.nothingHalfWritten(tc.name)
		})
	}
}
