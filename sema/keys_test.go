package sema

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

func TestFenceDelay(t *testing.T) { // D7
	const s = 1e9
	if d := fenceDelay(10*s, 6*s); d != 4*s {
		t.Errorf("ttl 10s, margin 6s: fence after %v, want 4s", d)
	}
	// margin too large: fence at the first failed keep-alive (2 intervals)
	if d := fenceDelay(5*s, 6*s); d != 2*keepAliveInterval(5*s, true) {
		t.Errorf("ttl 5s, margin 6s: fence after %v", d)
	}
	if !FenceTooLate(5*s, 5*s) || FenceTooLate(10*s, 5*s) {
		t.Error("FenceTooLate wrong for the defaults")
	}
	if iv := keepAliveInterval(10*s, true); iv != s {
		t.Errorf("hold cadence for 10s = %v, want 1s (at least once a second)", iv)
	}
	if iv := keepAliveInterval(3*s, true); iv != s/2 {
		t.Errorf("hold cadence for 3s = %v, want TTL/6", iv)
	}
}
