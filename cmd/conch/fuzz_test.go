package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema/schema"

	"github.com/conch-project/conch/sema"
)

// Fuzz targets for what conch takes from its caller. `make fuzz`
// runs each for a bounded time; the seed corpus is in testdata/fuzz.

// D4: an accepted name matches [A-Za-z0-9][A-Za-z0-9._-]{0,127}, and its
// key prefix ends with "/" and holds no other "/" after the root.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a", "heavy-jobs", "x.y_z-1", "-a", "", "a/b", "é", strings.Repeat("a", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if schema.ValidateName(name) != nil {
			return
		}
		if len(name) < 1 || len(name) > 128 || strings.ContainsAny(name, "/ \x00\n") || name[0] == '.' || name[0] == '-' || name[0] == '_' {
			t.Fatalf("accepted name %q", name)
		}
		if p := schema.NamePrefix(name); !strings.HasSuffix(p, "/") || strings.Count(strings.TrimPrefix(p, schema.KeyRoot), "/") != 1 {
			t.Fatalf("prefix %q of %q", p, name)
		}
	})
}

// D4: --max is a plain decimal 1..10000; what is accepted round-trips.
func FuzzMax(f *testing.F) {
	for _, s := range []string{"1", "10000", "10001", "0", "-1", "+1", "01", " 1", "1e3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := schema.ParseMax(s)
		if err != nil {
			return
		}
		if n < 1 || n > schema.MaxCapacity || strings.TrimLeft(s, "0") != strconv.Itoa(n) {
			t.Fatalf("ParseMax(%q) = %d", s, n)
		}
	})
}

// No duration overflows or goes negative; the bound holds.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"10", "1.5", ".5", "500ms", "1m30s", "-1", "NaN", "1e400", "876000h", "2562047h47m16.854775807s", "0x10", "1e-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			if len(err.Error()) > 160 {
				t.Fatalf("error of %d bytes for %d bytes of input", len(err.Error()), len(s))
			}
			return
		}
		if d < 0 || d > maxDuration {
			t.Fatalf("parseDuration(%q) = %v", s, d)
		}
		if rt := sema.RoundTTL(d); rt < d {
			t.Fatalf("RoundTTL(%v) = %v overflows", d, rt)
		}
		if ttl := slotrun.MinTTL(d); ttl < d || sema.FenceTooLate(ttl, d) {
			t.Fatalf("slotrun.MinTTL(%v) = %v", d, ttl)
		}
	})
}

// Any config file is read without a panic, and an error never
// echoes a line of it (it may hold a secret).
func FuzzConfig(f *testing.F) {
	for _, s := range []string{"[etcd]\nendpoints = https://a:1\ndial-timeout = 3s\n", "[etcd]\nhunter2-is-my-password\n", "[etcd]\nuser = \"unterminated\n",
		"endpoints = x:1\n", "[other]\nx = 1\n", "[etcd]\nendpoints = \n", "[etcd\n", "[]\n", "[etcd]\n;c\n#c\nuser=bob\npassword-file=/nonexistent\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		path := filepath.Join(dir, "conch.conf")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := resolveConn(connOptions{}, func(string) string { return "" }, path, true)
		if err == nil {
			return
		}
		msg := strings.ReplaceAll(err.Error(), path, "")
		for _, line := range strings.Split(body, "\n") {
			if l := strings.TrimSpace(line); len(l) >= 12 && strings.Contains(msg, l) {
				t.Fatalf("error %q echoes the line %q", err, l)
			}
		}
	})
}
