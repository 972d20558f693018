package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// h2cNotFound serves unencrypted HTTP/2 (as etcd's gRPC port does) that
// answers every request with 404, like a web server or a proxy's error page.
func h2cNotFound(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), Protocols: new(http.Protocols), ReadHeaderTimeout: 10 * time.Second}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// An endpoint that answers HTTP 404 at once is "not an etcd", said in one line
// without the server's response body, still 69 (D3: no etcd answered), for a run, --who and
// the login (where conch itself says it answers rather than "cannot reach").
func TestNotAnEtcd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := h2cNotFound(t)
	e.vars = append(e.vars, "CONCH_ENDPOINTS="+addr, "CONCH_DIAL_TIMEOUT=5s") // the last of a name wins
	for _, args := range [][]string{{"sema", "web", "--max", "1", "--", "true"}, {"sema", "web", "--who"},
		{"sema", "web", "--max", "1", "--user", "u:p", "--", "true"}} { // with a user, the login is the first call
		r := e.run(args...)
		if r.status != exitUnavailable || !strings.Contains(r.stderr, "not an etcd: it answered HTTP 404 (Not Found)") ||
			strings.Contains(r.stderr, "page not found") || len(args) != 3 && (!strings.Contains(r.stderr, "(from CONCH_ENDPOINTS) answers, but") || strings.Contains(r.stderr, "no answer")) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%q: %v\nwant 69 and one line saying it is not an etcd", args, r)
		}
	}
}
