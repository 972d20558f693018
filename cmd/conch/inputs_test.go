package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
)

// confWriter returns a function that writes body to a fresh config file in a temporary
// directory and returns its path.
func confWriter(t *testing.T) func(body string) string {
	dir, n := t.TempDir(), 0
	return func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("c%d.conf", n))
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func fixedEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Every message about a setting names its source; and
// no secret in messages, a user without a password refused, TLS with http:// refused.
func TestResolveConnErrorsNameSource(t *testing.T) {
	conf := confWriter(t)
	durConf := conf("[etcd]\n# comment\ndial-timeout = soon\n")
	epConf := conf("[etcd]\nendpoints = ftp://x:1\n")
	secretConf := conf("[etcd]\nhunter2-secret\n")
	unknownConf := conf("[etcd]\npasword-file = /x\n")
	quoteConf := conf("[etcd]\nuser = \"hunter2\n")
	for _, tc := range []struct {
		name    string
		o       connOptions
		env     map[string]string
		conf    string
		want    []string
		notWant string
	}{
		{"ETCDCTL_ENDPOINTS", connOptions{}, map[string]string{"ETCDCTL_ENDPOINTS": "localhost"}, "", []string{"from ETCDCTL_ENDPOINTS", `"localhost"`}, ""},
		{"CONCH_ENDPOINTS", connOptions{Endpoints: "x:0"}, map[string]string{"CONCH_ENDPOINTS": "x:0"}, "", []string{"from CONCH_ENDPOINTS"}, ""},
		{"--endpoints", connOptions{Endpoints: "x:0"}, nil, "", []string{"from --endpoints"}, ""},
		{"endpoints in file", connOptions{}, nil, epConf, []string{"from " + epConf + ":2", "unknown scheme"}, ""},
		{"comma only", connOptions{Endpoints: ","}, nil, "", []string{"no endpoint in the list"}, ""},
		{"CONCH_DIAL_TIMEOUT", connOptions{DialTimeout: "soon"}, map[string]string{"CONCH_DIAL_TIMEOUT": "soon"}, "", []string{"dial timeout from CONCH_DIAL_TIMEOUT", "invalid duration"}, "main."},
		{"ETCDCTL_DIAL_TIMEOUT", connOptions{}, map[string]string{"ETCDCTL_DIAL_TIMEOUT": "0"}, "", []string{"dial timeout from ETCDCTL_DIAL_TIMEOUT: must be more than 0"}, ""},
		{"dial-timeout in file", connOptions{}, nil, durConf, []string{"dial timeout from " + durConf + ":3"}, ""},
		{"config line not echoed", connOptions{}, nil, secretConf, []string{secretConf + ":2: not a `key = value` line"}, "hunter2"},
		{"config bad quote not echoed", connOptions{}, nil, quoteConf, []string{quoteConf + ":2: badly quoted value"}, "hunter2"},
		{"unknown config key", connOptions{}, nil, unknownConf, []string{unknownConf + ":2: unknown setting \"pasword-file\""}, ""},
		{"user-info redacted", connOptions{Endpoints: "https://root:hunter2@h:1"}, nil, "", []string{"xxxxx@h:1", "user-info"}, "hunter2"},
		// hostile test: a password with '/' (base64) or ',' (the list's separator)
		{"user-info with a slash redacted", connOptions{Endpoints: "http://alice:hun/ter2@h:1"}, nil, "", []string{"xxxxx@h:1", "user-info"}, "ter2"},
		{"user-info with a comma redacted", connOptions{Endpoints: "http://alice:hun,ter2@h:1"}, nil, "", []string{"xxxxx@h:1", "user-info"}, "hun"},
		{"user-info with commas redacted", connOptions{Endpoints: "m:1,http://alice:a,b,c@h:1"}, nil, "", []string{"xxxxx@h:1"}, "alice"},
		{"user without password", connOptions{User: "conch"}, nil, "", []string{`user "conch" (from --user) has no password`}, "user name is empty"},
		{"ETCDCTL_USER without password", connOptions{}, map[string]string{"ETCDCTL_USER": "conch"}, "", []string{"from ETCDCTL_USER"}, ""},
		{"http with TLS", connOptions{Endpoints: "http://h:1", CACert: "/x"}, nil, "", []string{"is plaintext, but TLS files are set"}, ""},
		{"password without user", connOptions{}, map[string]string{"ETCDCTL_PASSWORD": "hunter2"}, "", []string{"password was given without a user"}, "hunter2"},
		{"cert without key", connOptions{Cert: "/c"}, nil, "", []string{"--cert and --key must be given together"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolveConn(tc.o, fixedEnv(tc.env), tc.conf, tc.conf != "")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q contains %q", err, tc.notWant)
			}
		})
	}
}

// Warnings for a password file others can read and a config others can write.
func TestResolveConnWarnings(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o644)
	os.Chmod(pw, 0o644)
	conf := filepath.Join(dir, "conch.conf")
	os.WriteFile(conf, []byte("[etcd]\nuser = conch\npassword-file = "+pw+"\n"), 0o666)
	os.Chmod(conf, 0o666)
	s, err := resolveConn(connOptions{}, fixedEnv(nil), conf, true)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(s.Warnings, "\n")
	for _, w := range []string{"password file " + pw + " is readable by group or others (mode 0644)", "config file " + conf + " is writable by others (mode 0666)"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q lack %q", all, w)
		}
	}
	if strings.Contains(all, "s3cret") || s.Password != "s3cret" || s.PasswordFile != pw {
		t.Errorf("warnings %q, settings %+v", all, s)
	}
	os.Chmod(pw, 0o600)
	os.Chmod(conf, 0o640)
	if s, _ = resolveConn(connOptions{}, fixedEnv(nil), conf, true); len(s.Warnings) != 0 {
		t.Errorf("warnings for safe modes: %q", s.Warnings)
	}
	if s.EndpointsFrom != "the default" || s.DialTimeoutFrom != "the default" {
		t.Errorf("sources %q, %q", s.EndpointsFrom, s.DialTimeoutFrom)
	}
}

// Durations as flock takes them, bounded against overflow.
func TestParseDurationBounds(t *testing.T) {
	for in, want := range map[string]time.Duration{"1.5": 1500 * time.Millisecond, ".5": 500 * time.Millisecond, " 2 ": 2 * time.Second,
		"1e1": 10 * time.Second, "0.000000001": time.Nanosecond, "876000h": maxDuration, "3153600000": maxDuration} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"-0.5": "negative", "-0": "negative", "NaN": "invalid", "Inf": "invalid", "0x10": "invalid",
		"876001h": "more than", "3153600001": "more than", "9223372036s": "more than", "2562047h47m16.854775808s": "invalid", "99999999999999999999": "more than"} {
		if _, err := parseDuration(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDuration(%q) = %v, want %q", in, err, want)
		}
	}
}

// The fencing warning's advice is computed; it must be the smallest TTL that fences in time.
func TestMinTTLSweep(t *testing.T) {
	kas := []time.Duration{maxDuration, 1<<40 + 7}
	for ka := time.Duration(0); ka < 20*time.Second; ka += 50 * time.Millisecond {
		kas = append(kas, ka)
	}
	for _, ka := range kas {
		ttl := slotrun.MinTTL(ka)
		if sema.FenceTooLate(ttl, ka) || (ttl > time.Second && !sema.FenceTooLate(ttl-time.Second, ka)) {
			t.Errorf("slotrun.MinTTL(%v) = %v, not the smallest TTL that fences in time", ka, ttl)
		}
	}
}

// Flag errors name no Go type; -q and fractional --wait parse.
func TestFlagMessages(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		notWant string
	}{
		{[]string{"sema", "x", "--max", "1", "--ttl", "soon", "--", "true"}, "invalid value for `--ttl': invalid duration \"soon\"", "main."},
		{[]string{"sema", "x", "--max", "1", "-E", "x", "--", "true"}, "is not a decimal number", "strconv"},
		{[]string{"sema", "x", "--max", "1", "--endpoints", "", "--", "true"}, "empty: name at least one endpoint", "main."},
		{[]string{"sema", "x", "--max", "1", "--wait", "1e400", "--", "true"}, "invalid duration", "main."},
	} {
		var out, errb bytes.Buffer
		status, _ := run(append(tc.args[:len(tc.args):len(tc.args)], "--config", "/dev/null"), &out, &errb, fixedEnv(nil))
		if status != exitUsage || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), tc.notWant) {
			t.Errorf("%q: status %d, stderr %q; want 64 and %q", tc.args, status, errb.String(), tc.want)
		}
	}
	s := semaCmd{getenv: fixedEnv(nil), stderr: &bytes.Buffer{}, dashdash: true, command: []string{"true"}}
	if _, err := newParser(&globalOptions{}, &s).ParseArgs([]string{"sema", "x", "--max", "1", "-q", "--wait", "1.5"}); err != nil || !s.Quiet || s.Wait.d != 1500*time.Millisecond {
		t.Errorf("-q --wait 1.5: %v, %+v", err, s.Wait)
	}
}

// Each file conch reads goes through the bounded, non-blocking read.
func TestEveryFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\nsecond line\n"), 0o600)
	bigConf := filepath.Join(dir, "big.conf")
	os.WriteFile(bigConf, bytes.Repeat([]byte("# padding\n"), etcdconn.MaxConfigFile/10+1), 0o600)
	for _, tc := range []struct {
		name string
		o    connOptions
		conf string
		want string
	}{
		{"config is /dev/zero", connOptions{}, "/dev/zero", "config file /dev/zero: not a regular file (it is a character device)"},
		{"config is a FIFO", connOptions{}, fifo, "not a regular file (it is a FIFO)"},
		{"config too large", connOptions{}, bigConf, "more than the 65536 allowed"},
		{"password file is a FIFO", connOptions{User: "u", PasswordFile: fifo}, "", "password file " + fifo + ": not a regular file"},
		{"empty password", connOptions{User: "u", PasswordFile: empty}, "", "is empty (its first line is the password)"},
	} {
		if _, err := resolveConn(tc.o, fixedEnv(nil), tc.conf, tc.conf != ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Config errors give FILE:LINE in conch's words: an unknown section names the one
// valid section (go-flags said "could not find option group" without a line), and a setting
// given twice is refused with both lines (go-flags kept the last in silence: two endpoints
// lines are two clusters). Keys are matched without case, as go-flags does.
func TestConfigSectionsAndDuplicates(t *testing.T) {
	conf := confWriter(t)
	for _, tc := range []struct{ body, want string }{
		{"# conch\n[etc]\nendpoints = a:1\n", ":2: unknown section [etc]: conch.conf has one section, [etcd]"},
		{"[etcd]\nendpoints = a:1\n[client]\n", ":3: unknown section [client]"},
		{"[[etcd]]\nendpoints = a:1\n", ":1: unknown section [[etcd]]"},
		{"[etcd\nendpoints = a:1\n", ":1: malformed [section] header"},
		{"[etcd]\nendpoints = a:1\n\nendpoints = b:1\n", ":4: endpoints is set again (first at line 2): set each setting once"},
		{"[etcd]\nuser = a\n[ETCD]\nUser = b\n", ":4: user is set again (first at line 2)"},
	} {
		p := conf(tc.body)
		_, err := resolveConn(connOptions{}, fixedEnv(nil), p, true)
		if err == nil || !strings.Contains(err.Error(), "config file "+p+tc.want) || strings.Contains(err.Error(), "option group") {
			t.Errorf("%q: %v, want %q", tc.body, err, p+tc.want)
		}
	}
	for body, from := range map[string]string{"[ETCD]\nendpoints = a:1\n": ":2", "endpoints = a:1\n[etcd]\nuser = u:p\n": ":1"} {
		p := conf(body)
		s, err := resolveConn(connOptions{}, fixedEnv(nil), p, true)
		if err != nil || s.EndpointsFrom != p+from {
			t.Errorf("%q: %v, endpoints from %q; want accepted, from %s", body, err, s.EndpointsFrom, p+from)
		}
	}
}

// `endpoints =` in the config file is refused with FILE:LINE, as --endpoints "" and
// CONCH_ENDPOINTS= are, instead of meaning the default 127.0.0.1:2379; so is a quoted empty
// value. The file is checked as a whole: a flag that overrides it does not hide the mistake.
func TestConfigEmptyEndpoints(t *testing.T) {
	dir := t.TempDir()
	for i, body := range []string{"[etcd]\nendpoints =\n", "[etcd]\n# x\nendpoints = \"\"\n", "[etcd]\nendpoints =   \n"} {
		p := filepath.Join(dir, fmt.Sprintf("c%d.conf", i))
		os.WriteFile(p, []byte(body), 0o640)
		line := strings.Count(body, "\n")
		for _, o := range []connOptions{{}, {Endpoints: "flag:1"}} {
			_, err := resolveConn(o, fixedEnv(nil), p, true)
			if want := fmt.Sprintf("config file %s:%d: endpoints is empty", p, line); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q with %+v: %v, want %q", body, o, err, want)
			}
		}
	}
	var out, errb bytes.Buffer // --endpoints: without the check, no etcd of someone else's is asked
	p := filepath.Join(dir, "c0.conf")
	if status, _ := run([]string{"sema", "x", "--max", "1", "--endpoints", "127.0.0.1:1", "--config", p, "--", "true"}, &out, &errb, fixedEnv(nil)); status != exitUsage || !strings.Contains(errb.String(), p+":2: endpoints is empty") {
		t.Errorf("conch with %s: status %d, stderr %q; want 64 naming the line", p, status, errb.String())
	}
}

// The file is checked as a whole (operator trial): a bad endpoints or dial-timeout value in it
// is refused with FILE:LINE even where a flag overrides it, so that the typo shows on every
// host, not only on those without the override.
func TestConfigBadValuesOverridden(t *testing.T) {
	conf := confWriter(t)
	for _, tc := range []struct {
		body string
		over connOptions
		want string
	}{
		{"[etcd]\nendpoints = ftp://x:1\n", connOptions{Endpoints: "127.0.0.1:1"}, ":2: invalid etcd endpoint"},
		{"[etcd]\ndial-timeout = 5 sec\n", connOptions{DialTimeout: "2s"}, ":2"},
		{"[etcd]\n\ndial-timeout = -3s\n", connOptions{DialTimeout: "2s"}, ":3: invalid duration"},
	} {
		p := conf(tc.body)
		_, err := resolveConn(tc.over, fixedEnv(nil), p, true)
		if err == nil || !strings.Contains(err.Error(), p+tc.want) {
			t.Errorf("%q with %+v: %v, want an error naming %s%s", tc.body, tc.over, err, p, tc.want)
		}
	}
}

// The shipped /etc/conch/conch.conf passes the config checks (one section, each key once)
// and, all commented out, leaves the defaults.
func TestShippedConfigReads(t *testing.T) {
	s, err := resolveConn(connOptions{}, fixedEnv(nil), filepath.Join("..", "..", "contrib", "systemd", "conch.conf"), true)
	if err != nil || s.EndpointsFrom != "the default" || len(s.Warnings) != 0 {
		t.Fatalf("shipped conch.conf: %v, endpoints from %q, warnings %q", err, s.EndpointsFrom, s.Warnings)
	}
}
