package fleetlock

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
)

// With a certificate the server speaks HTTPS only (TLS 1.2 or later); with a client CA it
// requires client certificates signed by it; files it cannot use are refused at start.
func TestTLS(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	dir := t.TempDir()
	ca := etcdtest.NewCA(t, dir, "ca")
	valid := etcdtest.Cert{NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	cert, key := ca.Leaf(t, dir, "server", valid)
	ccert, ckey := ca.Leaf(t, dir, "client", etcdtest.Cert{NotBefore: valid.NotBefore, NotAfter: valid.NotAfter})
	tc, err := TLSConfig(cert, key, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	base := serveWith(t, Config{Client: c, Groups: map[string]int{"default": 1}, Hold: time.Hour}, tc).base
	client := func(min, max uint16, withCert bool) *http.Client {
		cfg := etcdtest.ClientTLS(t, ca, ccert, ckey)
		if !withCert {
			cfg.Certificates = nil
		}
		cfg.MinVersion, cfg.MaxVersion = min, max
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	if r, err := rawPost(client(tls.VersionTLS12, tls.VersionTLS13, true), base+"/v1/pre-reboot", map[string]string{ProtocolHeader: "true"},
		`{"client_params":{"id":"`+idA+`","group":"default"}}`); err != nil || !r.ok() {
		t.Fatalf("HTTPS with a client certificate: %v %+v", err, r)
	}
	if _, err := rawPost(client(tls.VersionTLS12, tls.VersionTLS13, false), base+"/v1/steady-state", map[string]string{ProtocolHeader: "true"}, "{}"); err == nil {
		t.Error("served a client without a certificate")
	}
	if _, err := rawPost(client(tls.VersionTLS10, tls.VersionTLS11, true), base+"/v1/steady-state", map[string]string{ProtocolHeader: "true"}, "{}"); err == nil {
		t.Error("served TLS 1.1")
	}
	if _, err := rawPost(&http.Client{Timeout: 10 * time.Second}, "http://"+strings.TrimPrefix(base, "https://")+"/v1/steady-state", map[string]string{ProtocolHeader: "true"}, "{}"); err == nil {
		t.Error("served plain HTTP on the TLS port")
	}
	for _, bad := range [][3]string{{dir + "/none.pem", key, ""}, {cert, cert, ""}, {cert, key, key}, {"/dev/zero", key, ""}} {
		if _, err := TLSConfig(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("TLSConfig%q: accepted", bad)
		} else if !strings.Contains(err.Error(), "/") {
			t.Errorf("TLSConfig%q: %v does not name the file", bad, err)
		}
	}
}
