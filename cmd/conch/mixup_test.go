package main

import (
	"os"
	"strings"
	"testing"
)

// TestSchemeMixUps: https:// to a plaintext etcd closes the connection during the handshake
// without an answer, which conch cannot tell from an outage (69 after the dial timeout), but
// its message says what it probably is (the hostile test). The reverse, http:// to a
// TLS etcd, is in TestTLSMisconfiguration's server set-up.
func TestSchemeMixUps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hostport := strings.TrimPrefix(e.srv.Endpoint, "http://")
	pw := e.path("pw")
	if err := os.WriteFile(pw, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, login := range [][]string{nil, {"--user", "root", "--password-file", pw}} {
		args := append([]string{"sema", "mx", "--max", "1", "--endpoints", "https://" + hostport, "--dial-timeout", "1s"}, login...)
		r := e.run(append(args, "--", "true")...)
		if r.status != exitUnavailable || !strings.Contains(r.stderr, "a plaintext etcd on this port? then use http://") {
			t.Errorf("https:// to a plaintext etcd, login %v: %v; want 69 and the hint", login, r)
		}
	}
}
