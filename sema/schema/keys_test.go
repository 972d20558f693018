package schema

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) { // D4
	good := []string{"a", "Z9", "certs-renew", "video.encode_2", "0" + strings.Repeat("x", 127)}
	bad := []string{"", "-a", ".a", "_a", "a/b", "a b", "é", "0" + strings.Repeat("x", 128), "a\n"}
	for _, n := range good {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateName(n); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidateName(%q) = %v, want ErrBadName", n, err)
		}
	}
}

func TestParseMax(t *testing.T) { // D4
	for in, want := range map[string]int{"1": 1, "2": 2, "10000": 10000, "007": 7} {
		if got, err := ParseMax(in); err != nil || got != want {
			t.Errorf("ParseMax(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "+1", "10001", "1.5", "1e3", " 1", "0x10", "99999999999999999999"} {
		if _, err := ParseMax(in); !errors.Is(err, ErrBadMax) {
			t.Errorf("ParseMax(%q) = %v, want ErrBadMax", in, err)
		}
	}
}

func TestPrefixesDoNotOverlap(t *testing.T) { // D4
	if strings.HasPrefix(Prefix("ab", 1), NamePrefix("a")) {
		t.Fatal("prefix of a matches ab")
	}
	if strings.HasPrefix(Prefix("a", 10), Prefix("a", 1)) {
		t.Fatal("prefix of a[1] matches a[10]")
	}
}
