package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
)

// resolveConn hands the config file's values to etcdconn.Resolve with their FILE:LINE (D9b):
// the file ranks below ETCDCTL_*, its warnings come before Resolve's, and a missing file is an
// error only when named. The precedence itself is tested in internal/etcdconn.
func TestResolveConnReadsFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conch.conf")
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\nignored\n"), 0o600)
	os.WriteFile(conf, []byte("[etcd]\n# the cluster\nendpoints = file:1,file:2\ndial-timeout = 7s\nuser = fileuser\npassword-file = "+pw+"\n"), 0o666)
	os.Chmod(conf, 0o666)
	s, err := resolveConn(connOptions{}, fixedEnv(nil), conf, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Endpoints, ",") != "file:1,file:2" || s.EndpointsFrom != conf+":3" || s.DialTimeout != 7*time.Second ||
		s.DialTimeoutFrom != conf+":4" || s.User != "fileuser" || s.Password != "s3cret" || s.EndpointsHint != "" {
		t.Fatalf("from file: %+v", s)
	}
	s, _ = resolveConn(connOptions{}, fixedEnv(map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}), conf, true)
	if len(s.Warnings) != 2 || !strings.HasPrefix(s.Warnings[0], "config file "+conf+" is writable by others") ||
		!strings.HasPrefix(s.Warnings[1], "endpoints from ETCDCTL_ENDPOINTS (ctl:1) override those of "+conf+":3 (file:1,file:2)") {
		t.Fatalf("warnings %q: want the file's, then the override", s.Warnings)
	}
	s, err = resolveConn(connOptions{}, fixedEnv(nil), filepath.Join(dir, "absent.conf"), false)
	if err != nil || strings.Join(s.Endpoints, ",") != etcdconn.DefaultEndpoint || s.EndpointsHint != defaultEndpointsHint {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	if _, err := resolveConn(connOptions{}, fixedEnv(nil), filepath.Join(dir, "absent.conf"), true); err == nil {
		t.Error("missing explicit config: no error")
	}
	if _, err := resolveConn(connOptions{DialTimeout: "soon"}, fixedEnv(nil), "", false); !errors.Is(err, etcdconn.ErrSettings) ||
		err.Error() != `dial timeout from --dial-timeout: invalid duration "soon": use Go syntax (500ms, 1m30s) or seconds (10, 1.5)` {
		t.Errorf("bad --dial-timeout: %v; want ErrSettings in conch's duration words", err)
	}
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("[etcd]\nendpoint = typo:1\n"), 0o644)
	if _, err := resolveConn(connOptions{}, fixedEnv(nil), bad, true); err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("unknown key in config: %v, want an error naming it", err)
	}
	// user-info in the file's endpoints is refused even under an override (the file is checked
	// as a whole), and the refusal shows it redacted, '/' and ',' in the password included
	for i, eps := range []string{"http://root:hunter2@file:1", "http://root:hun/ter,2@file:1"} {
		p := filepath.Join(dir, fmt.Sprintf("secret%d.conf", i))
		os.WriteFile(p, []byte("[etcd]\nendpoints = "+eps+"\n"), 0o640)
		_, err := resolveConn(connOptions{}, fixedEnv(map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}), p, true)
		if err == nil || !strings.Contains(err.Error(), p+":2: invalid etcd endpoint \"http://xxxxx@file:1\"") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter,2") {
			t.Errorf("%s under ETCDCTL_ENDPOINTS: %v; want refused, redacted", p, err)
		}
	}
}

// CONCH_* environment reaches the connection flags through go-flags; the
// semaphore's own settings are never read from the environment (D5).
func TestEnvOnlyForConnection(t *testing.T) {
	t.Setenv("CONCH_ENDPOINTS", "envhost:1")
	t.Setenv("CONCH_MAX", "3")
	t.Setenv("CONCH_WAIT", "1s")
	var g globalOptions
	s := semaCmd{getenv: os.Getenv, dashdash: true, command: []string{"true"}}
	if _, err := newParser(&g, &s).ParseArgs([]string{"sema", "x", "--config", "/dev/null"}); err == nil {
		t.Fatal("--max was taken from CONCH_MAX")
	}
	s = semaCmd{getenv: os.Getenv, dashdash: true, command: []string{"true"}}
	if _, err := newParser(&g, &s).ParseArgs([]string{"sema", "x", "--max", "1", "--config", "/dev/null"}); err != nil {
		t.Fatal(err)
	}
	if s.Conn.Endpoints != "envhost:1" || s.Wait.set {
		t.Fatalf("endpoints %q, wait set %v", s.Conn.Endpoints, s.Wait.set)
	}
}

func TestParseDuration(t *testing.T) { // D4
	for in, want := range map[string]time.Duration{"10": 10 * time.Second, "500ms": 500 * time.Millisecond, "1m30s": 90 * time.Second, "0": 0} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"-1", "-1s", "soon", ""} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
}

func TestMinTTL(t *testing.T) { // the TTL warning's advice must silence it
	for _, ka := range []time.Duration{0, time.Second, 5 * time.Second, 9 * time.Second, 90 * time.Minute} {
		ttl := slotrun.MinTTL(ka)
		if sema.FenceTooLate(ttl, ka) || (ttl > time.Second && !sema.FenceTooLate(ttl-time.Second, ka)) {
			t.Errorf("slotrun.MinTTL(%v) = %v, not the smallest TTL that fences in time", ka, ttl)
		}
	}
}

// A stale ETCDCTL_ENDPOINTS over the config file's endpoints is
// used (D9) but said on stderr, and -v names the endpoints used and their
// source; the run itself goes on.
func TestEndpointsOverrideSaid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	conf := e.path("stale.conf")
	os.WriteFile(conf, []byte("[etcd]\nendpoints = 127.0.0.1:9\n"), 0o640)
	var vars []string
	for _, kv := range e.vars {
		if !strings.HasPrefix(kv, "CONCH_ENDPOINTS=") && !strings.HasPrefix(kv, "CONCH_CONFIG=") {
			vars = append(vars, kv)
		}
	}
	e.vars = append(vars, "ETCDCTL_ENDPOINTS="+e.srv.Endpoint, "CONCH_CONFIG="+conf)
	r := e.run("sema", "stale", "--max", "1", "-v", "--", "true")
	want := []string{
		"conch: WARNING: endpoints from ETCDCTL_ENDPOINTS (" + e.srv.Endpoint + ") override those of " + conf + ":2 (127.0.0.1:9)",
		"conch: using etcd at " + e.srv.Endpoint + " (from ETCDCTL_ENDPOINTS), dial timeout 5s (from the default)",
	}
	for _, w := range want {
		if r.status != 0 || !strings.Contains(r.stderr, w) {
			t.Errorf("%v\nwant status 0 and %q", r, w)
		}
	}
	if r := e.run("sema", "stale", "--max", "1", "--", "true"); r.status != 0 || strings.Contains(r.stderr, "using etcd") || !strings.Contains(r.stderr, "WARNING: endpoints from") {
		t.Errorf("without -v: %v; want the warning only", r)
	}
}
