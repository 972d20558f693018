package etcdconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConf returns a function that writes body to a fresh config file (mode 0640) in a
// temporary directory and returns its path.
func writeConf(t *testing.T) func(body string) string {
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

// conch.conf saved with a UTF-8 byte order mark reads as without it; a comment after a
// value is refused with FILE:LINE rather than read into the value (D9a).
func TestConfigBOMAndTrailingComment(t *testing.T) {
	write := writeConf(t)
	p := write("\xef\xbb\xbf[etcd]\nendpoints = 10.0.0.1:2379\n")
	vals, _, err := ReadConfig(p, true)
	if err != nil || vals["endpoints"] != (FileValue{"10.0.0.1:2379", p + ":2"}) {
		t.Errorf("BOM: %+v, %v", vals, err)
	}
	for _, body := range []string{
		"[etcd]\nendpoints = 10.0.0.1:2379 ; the old cluster\n",
		"[etcd]\ndial-timeout = 5s\t# seconds\n",
	} {
		_, _, err := ReadConfig(write(body), true)
		if err == nil || !strings.Contains(err.Error(), ":2: ") || !strings.Contains(err.Error(), "has a comment after its value") {
			t.Errorf("%q: %v, want FILE:2 and the comment refused", body, err)
		}
	}
}

// Each refusal names FILE:LINE and what is wrong, is of class ErrConfig, and never echoes the
// line; the first error in the file's order of checks wins (D9, D9c).
func TestReadConfigErrors(t *testing.T) {
	write := writeConf(t)
	for body, want := range map[string]string{
		"[etcd]\nhunter2-is-my-password\n":                ":2: not a `key = value` line",
		"[etcd\nendpoints = a:1\n":                        ":1: malformed [section] header",
		"[ ]\n":                                           ":1: malformed [section] header",
		"[etcd]\nuser = \"unterminated\n":                 ":2: badly quoted value",
		"[etcd]\nendpoint = a:1\n":                        ":2: unknown setting \"endpoint\" (known in [etcd]: endpoints, cacert, cert, key, user, password-file, dial-timeout)",
		"[other]\nx = 1\n":                                ":1: unknown section [other]: conch.conf has one section, [etcd]",
		"[etcd]\nuser = a\nUSER = b\n":                    ":3: user is set again (first at line 2): set each setting once",
		"[etcd]\nendpoints = \n":                          ":2: endpoints is empty",
		"[etcd]\nuser = a\nuser = b\n[etcd\n":             ":4: malformed [section] header", // the lines' form is checked first
		"[etcd]\nuser = a ; x\nnope = 1\n":                ":3: unknown setting",            // then the settings' names
		"[etcd]\n" + strings.Repeat("k", 50) + "\x01 = 1": "unknown setting \"" + strings.Repeat("k", 40) + "...\"",
	} {
		p := write(body)
		_, _, err := ReadConfig(p, true)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "config file "+p) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// Values are trimmed and unquoted, keys read in any case, lines before [etcd] are its own;
// every setting comes back, "" with the file alone as its source when unset. A missing file is
// nothing unless required; an unreadable one is also of ReadBounded's class.
func TestReadConfigValues(t *testing.T) {
	write := writeConf(t)
	p := write("user = bob\n[ETCD]\n# c\n; c\nEndpoints = \"a:1,b:2\"\ndial-timeout=  3s  \n")
	vals, warn, err := ReadConfig(p, true)
	if err != nil || len(warn) != 0 || len(vals) != 7 {
		t.Fatalf("%+v %v %v", vals, warn, err)
	}
	for k, want := range map[string]FileValue{"user": {"bob", p + ":1"}, "endpoints": {"a:1,b:2", p + ":5"},
		"dial-timeout": {"3s", p + ":6"}, "cacert": {"", p}} {
		if vals[k] != want {
			t.Errorf("%s = %+v, want %+v", k, vals[k], want)
		}
	}
	absent := filepath.Join(t.TempDir(), "absent.conf")
	if vals, _, err := ReadConfig(absent, false); err != nil || len(vals) != 0 {
		t.Errorf("missing, not required: %v %v", vals, err)
	}
	if _, _, err := ReadConfig(absent, true); !errors.Is(err, ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing, required: %v", err)
	}
	os.Chmod(p, 0o646)
	if _, warn, _ := ReadConfig(p, true); len(warn) != 1 || !strings.Contains(warn[0], "writable by others (mode 0646)") {
		t.Errorf("world-writable: %q", warn)
	}
}
