package etcdconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fixedEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// file is a config file's values, each set at "conch.conf:N" in the order given.
func file(kv ...string) map[string]FileValue {
	m := map[string]FileValue{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = FileValue{kv[i+1], "conch.conf:" + string(rune('2'+i/2))}
	}
	return m
}

// D9: flags > CONCH_* > ETCDCTL_* > config file > default, per setting.
func TestResolvePrecedence(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("s3cret\nignored\n"), 0o600)
	conf := file("endpoints", "file:1,file:2", "dial-timeout", "7s", "user", "fileuser", "password-file", pw)
	src := func(f Flagged, env map[string]string) Sources {
		return Sources{Flagged: f, Getenv: fixedEnv(env), File: conf}
	}

	s, err := Resolve(src(Flagged{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Endpoints, ",") != "file:1,file:2" || s.EndpointsFrom != "conch.conf:2" || s.DialTimeout != 7*time.Second ||
		s.DialTimeoutFrom != "conch.conf:3" || s.User != "fileuser" || s.Password != "s3cret" || s.PasswordFile != pw {
		t.Fatalf("from file: %+v", s)
	}
	s, _ = Resolve(src(Flagged{}, map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1", "ETCDCTL_USER": "bob:pw2", "ETCDCTL_DIAL_TIMEOUT": "2s"}))
	if strings.Join(s.Endpoints, ",") != "ctl:1" || s.User != "bob" || s.Password != "pw2" || s.DialTimeout != 2*time.Second || s.DialTimeoutFrom != "ETCDCTL_DIAL_TIMEOUT" {
		t.Fatalf("ETCDCTL over file: %+v", s)
	}
	// Flagged holds flags and CONCH_* (go-flags env tags): it wins, and is named after the
	// variable when that holds the same value
	s, _ = Resolve(src(Flagged{Endpoints: "flag:1", DialTimeout: "3s"}, map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1", "CONCH_DIAL_TIMEOUT": "3s"}))
	if strings.Join(s.Endpoints, ",") != "flag:1" || s.EndpointsFrom != "--endpoints" || s.DialTimeout != 3*time.Second || s.DialTimeoutFrom != "CONCH_DIAL_TIMEOUT" {
		t.Fatalf("flag over ETCDCTL: %+v", s)
	}
	// the password ranks like the user (D9): a flag's NAME:PASSWORD beats
	// ETCDCTL_PASSWORD, which beats the config file's password file
	s, _ = Resolve(src(Flagged{User: "amy:fromflag"}, map[string]string{"ETCDCTL_PASSWORD": "fromenv"}))
	if s.User != "amy" || s.Password != "fromflag" {
		t.Fatalf("flag NAME:PASSWORD over ETCDCTL_PASSWORD: %+v", s)
	}
	s, _ = Resolve(src(Flagged{User: "amy"}, map[string]string{"ETCDCTL_PASSWORD": "fromenv"}))
	if s.User != "amy" || s.Password != "fromenv" || s.PasswordFile != "" {
		t.Fatalf("ETCDCTL_PASSWORD over the file's password file: %+v", s)
	}
}

// With no source set (nil Getenv, File and ParseDuration), the defaults, and the hint only
// for the default endpoints.
func TestResolveDefaults(t *testing.T) {
	s, err := Resolve(Sources{DefaultHint: "set them"})
	if err != nil || strings.Join(s.Endpoints, ",") != DefaultEndpoint || s.EndpointsFrom != "the default" || s.EndpointsHint != "set them" ||
		s.DialTimeout != DefaultDialTimeout || s.DialTimeoutFrom != "the default" || s.User != "" || len(s.Warnings) != 0 {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	if s, err = Resolve(Sources{Flagged: Flagged{Endpoints: "a:1", DialTimeout: "1m"}, DefaultHint: "set them"}); err != nil || s.EndpointsHint != "" || s.DialTimeout != time.Minute {
		t.Fatalf("set endpoints: %+v, %v; want no hint, time.ParseDuration", s, err)
	}
}

// Every error is ErrSettings, names the setting's source, and shows no secret; the file's
// endpoints and dial timeout are checked even when overridden (D9b).
func TestResolveErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		f       Flagged
		env     map[string]string
		file    map[string]FileValue
		want    string
		notWant string
	}{
		{"ETCDCTL_ENDPOINTS", Flagged{}, map[string]string{"ETCDCTL_ENDPOINTS": "localhost"}, nil, `endpoints from ETCDCTL_ENDPOINTS: invalid etcd endpoint "localhost"`, ""},
		{"CONCH_ENDPOINTS", Flagged{Endpoints: "x:0"}, map[string]string{"CONCH_ENDPOINTS": "x:0"}, nil, "from CONCH_ENDPOINTS", ""},
		{"--endpoints", Flagged{Endpoints: "x:0"}, nil, nil, "from --endpoints", ""},
		{"comma only", Flagged{Endpoints: ","}, nil, nil, "no endpoint in the list", ""},
		{"file endpoints overridden", Flagged{Endpoints: "a:1"}, nil, file("endpoints", "http://root:hunter2@file:1"), `endpoints from conch.conf:2: invalid etcd endpoint "http://xxxxx@file:1"`, "hunter2"},
		{"file dial timeout overridden", Flagged{DialTimeout: "2s"}, nil, file("dial-timeout", "soon"), "dial timeout from conch.conf:2: ", ""},
		{"ETCDCTL_DIAL_TIMEOUT", Flagged{}, map[string]string{"ETCDCTL_DIAL_TIMEOUT": "0"}, nil, "dial timeout from ETCDCTL_DIAL_TIMEOUT: must be more than 0", ""},
		{"user without password", Flagged{User: "conch"}, nil, nil, `user "conch" (from --user) has no password`, ""},
		{"file user without password", Flagged{}, nil, file("user", "conch"), `user "conch" (from conch.conf:2) has no password`, ""},
		{"user with a control character", Flagged{}, map[string]string{"ETCDCTL_USER": "a\nb:pw"}, nil, "user from ETCDCTL_USER has a control character in it", ""},
		{"password without user", Flagged{}, map[string]string{"ETCDCTL_PASSWORD": "hunter2"}, nil, "password was given without a user", "hunter2"},
		{"unreadable password file", Flagged{User: "u", PasswordFile: filepath.Join(dir, "nope")}, nil, nil, "cannot read password file: open " + filepath.Join(dir, "nope"), ""},
		{"cert without key", Flagged{Cert: "/c"}, nil, nil, "--cert and --key must be given together", ""},
		{"http with TLS", Flagged{Endpoints: "http://h:1", CACert: "/x"}, nil, nil, "is plaintext, but TLS files are set", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(Sources{Flagged: tc.f, Getenv: fixedEnv(tc.env), File: tc.file})
			if !errors.Is(err, ErrSettings) || !strings.Contains(err.Error(), tc.want) || tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %v; want ErrSettings with %q", err, tc.want)
			}
			if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrRefused) {
				t.Errorf("error %v is of a connection's class", err)
			}
		})
	}
}

// A source that overrides endpoints another source also sets, to
// other endpoints, is warned about in one line naming both (D9's order
// stays). (Credentials in a URL are refused, redacted: TestResolveErrors.)
func TestResolveOverrideWarning(t *testing.T) {
	conf := file("endpoints", "file:1, file:2")
	for _, tc := range []struct {
		name string
		f    Flagged
		env  map[string]string
		file map[string]FileValue
		want string // "" for no warning
	}{
		{"file alone", Flagged{}, nil, conf, ""},
		{"ETCDCTL over file", Flagged{}, map[string]string{"ETCDCTL_ENDPOINTS": "ctl:1"}, conf,
			"endpoints from ETCDCTL_ENDPOINTS (ctl:1) override those of conch.conf:2 (file:1,file:2) (flags win over CONCH_*, which win over ETCDCTL_*, which win over the config file); unset or correct the one that is stale"},
		{"same endpoints, other order", Flagged{}, map[string]string{"ETCDCTL_ENDPOINTS": "file:2,file:1"}, conf, ""},
		{"same endpoints, spelled otherwise", Flagged{}, map[string]string{"ETCDCTL_ENDPOINTS": "http://file:2/,file:1,file:1"}, conf, ""},
		{"CONCH over ETCDCTL and file", Flagged{Endpoints: "env:1"}, map[string]string{"CONCH_ENDPOINTS": "env:1", "ETCDCTL_ENDPOINTS": "ctl:1"}, conf,
			"endpoints from CONCH_ENDPOINTS (env:1) override those of ETCDCTL_ENDPOINTS (ctl:1) and conch.conf:2 (file:1,file:2)"},
		{"flag over CONCH", Flagged{Endpoints: "flag:1"}, map[string]string{"CONCH_ENDPOINTS": "env:1"}, nil,
			"endpoints from --endpoints (flag:1) override those of CONCH_ENDPOINTS (env:1)"},
		{"flag equal to file", Flagged{Endpoints: "file:1,file:2"}, nil, conf, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Resolve(Sources{Flagged: tc.f, Getenv: fixedEnv(tc.env), File: tc.file})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(s.Warnings, "\n")
			if strings.Count(all, "override") > 1 {
				t.Fatalf("warnings %q: more than one line", all)
			}
			if tc.want == "" && all != "" || tc.want != "" && !strings.Contains(all, tc.want) {
				t.Fatalf("warnings %q, want %q", all, tc.want)
			}
		})
	}
}
