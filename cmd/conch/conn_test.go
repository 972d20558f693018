package main

import (
	"github.com/conch-project/conch/internal/slotrun"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/sema"
)

// D9: flags > CONCH_* > ETCDCTL_* > config file > default, per setting.
func TestResolveConnPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conch.conf")
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\nignored\n"), 0o600)
	os.WriteFile(conf, []byte("[etcd]\nendpoints = file:1,file:2\ndial-timeout = 7s\nuser = fileuser\npassword-file = "+pw+"\n"), 0o644)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	s, err := resolveConn(connOptions{}, env(nil), conf, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Endpoints, ",") != "file:1,file:2" || s.DialTimeout != 7*time.Second || s.User != "fileuser" || s.Password != "s3cret" {
		t.Fatalf("from file: %+v", s)
	}
	s, _ = resolveConn(connOptions{}, env(map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1", "ETCDCTL_USER": "bob:pw2", "ETCDCTL_DIAL_TIMEOUT": "2s"}), conf, true)
	if strings.Join(s.Endpoints, ",") != "ctl:1" || s.User != "bob" || s.Password != "pw2" || s.DialTimeout != 2*time.Second {
		t.Fatalf("ETCDCTL over file: %+v", s)
	}
	// flagged holds flags and CONCH_* (go-flags env tags): it wins
	s, _ = resolveConn(connOptions{Endpoints: "flag:1", DialTimeout: "3"}, env(map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}), conf, true)
	if strings.Join(s.Endpoints, ",") != "flag:1" || s.DialTimeout != 3*time.Second {
		t.Fatalf("flag over ETCDCTL: %+v", s)
	}
	// the password ranks like the user (D9): a flag's NAME:PASSWORD beats
	// ETCDCTL_PASSWORD, which beats the config file's password file
	s, _ = resolveConn(connOptions{User: "amy:fromflag"}, env(map[string]string{"ETCDCTL_PASSWORD": "fromenv"}), conf, true)
	if s.User != "amy" || s.Password != "fromflag" {
		t.Fatalf("flag NAME:PASSWORD over ETCDCTL_PASSWORD: %+v", s)
	}
	s, _ = resolveConn(connOptions{User: "amy"}, env(map[string]string{"ETCDCTL_PASSWORD": "fromenv"}), conf, true)
	if s.User != "amy" || s.Password != "fromenv" {
		t.Fatalf("ETCDCTL_PASSWORD over the file's password file: %+v", s)
	}
	s, _ = resolveConn(connOptions{}, env(nil), filepath.Join(dir, "absent.conf"), false)
	if strings.Join(s.Endpoints, ",") != etcdconn.DefaultEndpoint || s.DialTimeout != etcdconn.DefaultDialTimeout || s.User != "" {
		t.Fatalf("defaults: %+v", s)
	}
	for name, tc := range map[string]struct {
		o    connOptions
		path string
	}{
		"missing explicit config": {connOptions{}, filepath.Join(dir, "absent.conf")},
		"cert without key":        {connOptions{Cert: "c.pem"}, ""},
		"password without user":   {connOptions{PasswordFile: pw}, ""},
		"bad dial timeout":        {connOptions{DialTimeout: "-1s"}, ""},
		"unreadable password":     {connOptions{User: "u", PasswordFile: filepath.Join(dir, "nope")}, ""},
	} {
		if _, err := resolveConn(tc.o, env(nil), tc.path, tc.path != ""); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("[etcd]\nendpoint = typo:1\n"), 0o644)
	if _, err := resolveConn(connOptions{}, env(nil), bad, true); err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("unknown key in config: %v, want an error naming it", err)
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

// A source that overrides endpoints another source also sets, to
// other endpoints, is warned about in one line naming both (D9's order
// stays); credentials in an overridden URL are never shown.
func TestEndpointsOverrideWarning(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conch.conf")
	os.WriteFile(conf, []byte("[etcd]\n# the cluster\nendpoints = file:1, file:2\n"), 0o640)
	secret := filepath.Join(dir, "secret.conf")
	os.WriteFile(secret, []byte("[etcd]\nendpoints = http://root:hunter2@file:1\n"), 0o640)
	slashed := filepath.Join(dir, "slashed.conf")
	os.WriteFile(slashed, []byte("[etcd]\nendpoints = http://root:hun/ter,2@file:1\n"), 0o640)
	for _, tc := range []struct {
		name string
		o    connOptions
		env  map[string]string
		conf string
		want string // "" for no warning
	}{
		{"file alone", connOptions{}, nil, conf, ""},
		{"ETCDCTL over file", connOptions{}, map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}, conf,
			"endpoints from ETCDCTL_ENDPOINTS (ctl:1) override those of " + conf + ":3 (file:1,file:2)"},
		{"same endpoints, other order", connOptions{}, map[string]string{"ETCDCTL_ENDPOINTS": "file:2,file:1"}, conf, ""},
		{"same endpoints, spelled otherwise", connOptions{}, map[string]string{"ETCDCTL_ENDPOINTS": "http://file:2/,file:1,file:1"}, conf, ""},
		{"CONCH over ETCDCTL and file", connOptions{Endpoints: "env:1"}, map[string]string{"CONCH_ENDPOINTS": "env:1", "ETCDCTL_ENDPOINTS": "ctl:1"}, conf,
			"endpoints from CONCH_ENDPOINTS (env:1) override those of ETCDCTL_ENDPOINTS (ctl:1) and " + conf + ":3 (file:1,file:2)"},
		{"flag over CONCH", connOptions{Endpoints: "flag:1"}, map[string]string{"CONCH_ENDPOINTS": "env:1"}, "",
			"endpoints from --endpoints (flag:1) override those of CONCH_ENDPOINTS (env:1)"},
		{"flag equal to file", connOptions{Endpoints: "file:1,file:2"}, nil, conf, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := resolveConn(tc.o, fixedEnv(tc.env), tc.conf, tc.conf != "")
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(s.Warnings, "\n")
			if strings.Contains(all, "hunter2") || strings.Count(all, "override") > 1 {
				t.Fatalf("warnings %q: a password shown, or more than one line", all)
			}
			if tc.want == "" && all != "" || tc.want != "" && !strings.Contains(all, tc.want) {
				t.Fatalf("warnings %q, want %q", all, tc.want)
			}
		})
	}
	// user-info in the file's endpoints is refused even under an override (the file is checked
	// as a whole), and the refusal shows it redacted, '/' and ',' in the password included
	for _, p := range []string{secret, slashed} {
		_, err := resolveConn(connOptions{}, fixedEnv(map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}), p, true)
		if err == nil || !strings.Contains(err.Error(), p+":2: invalid etcd endpoint \"http://xxxxx@file:1\"") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter,2") {
			t.Errorf("%s under ETCDCTL_ENDPOINTS: %v; want refused, redacted", p, err)
		}
	}
}

// A stale ETCDCTL_ENDPOINTS over the config file's endpoints is
// used (D9) but said on stderr, and -v names the endpoints used and their
// source; the run itself goes on.
func TestEndpointsOverrideSaid(t *testing.T) {
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
