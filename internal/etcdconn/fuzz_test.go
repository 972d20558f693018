package etcdconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An endpoint list is accepted only when each endpoint checks; a
// URL's user-info never appears in an error.
func FuzzEndpoints(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2379", "https://a:1,https://b:2", "http://u:hunter2@h:1", ",", "unix:///x", "[::1]:2379", "h:0", "h:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseEndpoints(s)
		if err != nil {
			for _, e := range strings.Split(s, ",") {
				if _, rest, ok := strings.Cut(strings.TrimSpace(e), "://"); ok {
					if ui, _, ok := strings.Cut(rest, "@"); ok && len(ui) >= 4 && !strings.Contains(ui, "/") && strings.Contains(err.Error(), ui+"@") {
						t.Fatalf("error %q shows the user-info %q", err, ui)
					}
				}
			}
			return
		}
		if len(list) == 0 || len(list) > maxEndpoints {
			t.Fatalf("ParseEndpoints(%q) = %q", s, list)
		}
		for _, e := range list {
			if checkEndpoint(e) != nil || strings.Contains(e, ",") {
				t.Fatalf("ParseEndpoints(%q) kept %q", s, e)
			}
		}
	})
}

// Any config file is read without a panic; an error is of class ErrConfig and never echoes a
// line of it (it may hold a secret).
func FuzzReadConfig(f *testing.F) {
	for _, s := range []string{"[etcd]\nendpoints = https://a:1\ndial-timeout = 3s\n", "[etcd]\nhunter2-is-my-password\n", "[etcd]\nuser = \"unterminated\n",
		"endpoints = x:1\n", "[other]\nx = 1\n", "[etcd]\nendpoints = \n", "[etcd\n", "[]\n", "[etcd]\nsecret-setting-name = 1\n", "\xef\xbb\xbf[etcd]\nuser = a ; b\n"} {
		f.Add(s)
	}
	path := filepath.Join(f.TempDir(), "conch.conf")
	f.Fuzz(func(t *testing.T, body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadConfig(path, true)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("error %q is not of class ErrConfig", err)
		}
		msg := strings.ReplaceAll(err.Error(), path, "")
		for _, line := range strings.Split(body, "\n") {
			if l := strings.TrimSpace(line); len(l) >= 12 && strings.Contains(msg, l) {
				t.Fatalf("error %q echoes the line %q", err, l)
			}
		}
	})
}

// RedactEndpoint hides the user-info wherever it stands, a "://" after it included (a
// case FuzzEndpoints found: the part before "://" was taken for a scheme and shown).
func TestRedactEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:hunter2@h:1":   "http://xxxxx@h:1",
		"u:hunter2@h:1":          "xxxxx@h:1",
		"ter2@://ter2@":          "xxxxx@",
		"s3cret@h://x@h:1":       "xxxxx@h:1",
		"https://h:2379":         "https://h:2379",
		"http://u:a/b=@h:1/path": "http://xxxxx@h:1/path",
	} {
		if got := RedactEndpoint(in); got != want {
			t.Errorf("RedactEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}
