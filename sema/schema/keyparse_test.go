package schema

import (
	"strings"
	"testing"
)

// One parser for acquisition and --who; what a capacity segment is
// and what a key that does not fit gets.
func TestParseKeyKinds(t *testing.T) {
	lease := FormatLeaseID(0x694d7a1b2c3d4e5f)
	np := NamePrefix("x")
	for _, c := range []struct {
		key  string
		kind KeyKind
		max  int
	}{
		{Prefix("x", 3) + lease, KeyLease, 3},
		{Prefix("x", 3) + "0000000000000001", KeyLease, 3},
		{Prefix("x", 10000) + lease, KeyLease, 10000},
		{Prefix("x", 2) + "node2", KeySpread, 2},            // D11
		{Prefix("x", 2) + "694D7A1B2C3D4E5F", KeySpread, 2}, // upper case: not our spelling, but a name
		{Prefix("x", 2) + "694d7a1b2c3d4e5", KeySpread, 2},  // unpadded (15 digits): a name
		{Prefix("x", 2) + "", KeyUnexpected, 2},
		{Prefix("x", 2) + "a/b", KeyUnexpected, 2},
		{Prefix("x", 2) + "-node", KeyUnexpected, 2},
		{Prefix("x", 2) + "n\nx[1/1] HELD", KeyUnexpected, 2},
		{Prefix("x", 2) + strings.Repeat("a", 129), KeyUnexpected, 2},
		{np + "01/" + lease, KeyForeign, 0}, // leading zero: no conch ranks it
		{np + "+1/" + lease, KeyForeign, 0},
		{np + "0/" + lease, KeyForeign, 0},
		{np + "10001/" + lease, KeyForeign, 0},
		{np + " 1/" + lease, KeyForeign, 0},
		{np + "1e3/" + lease, KeyForeign, 0},
		{np + "3", KeyForeign, 0}, // no "/" after the capacity
		{np, KeyForeign, 0},
		{"/other/key", KeyForeign, 0},
		{NamePrefix("xy") + "1/" + lease, KeyForeign, 0}, // another name
	} {
		got := ParseKey("x", c.key)
		if got.Kind != c.kind || got.Max != c.max {
			t.Errorf("ParseKey(%q) = %v max %d, want %v max %d", c.key, got.Kind, got.Max, c.kind, c.max)
		}
		// the agreement with acquisition, which ranks every key under Prefix(name, max)
		if c.max > 0 && !strings.HasPrefix(c.key, Prefix("x", c.max)) {
			t.Errorf("%q: counted for %d but not under its prefix", c.key, c.max)
		}
	}
	if got := ParseKey("x", Prefix("x", 3)+lease); got.NameLease != 0x694d7a1b2c3d4e5f || got.Suffix != lease {
		t.Errorf("lease key parsed as %+v", got)
	}
}

func TestParseCapacitySegment(t *testing.T) {
	for m := 1; m <= MaxCapacity; m++ { // every capacity's own prefix segment parses back
		seg := strings.TrimSuffix(strings.TrimPrefix(Prefix("x", m), NamePrefix("x")), "/")
		if got, ok := parseCapacitySegment(seg); !ok || got != m {
			t.Fatalf("parseCapacitySegment(%q) = %d, %v", seg, got, ok)
		}
	}
	for _, s := range []string{"", "0", "00", "01", "007", "+1", "-1", "1 ", "10001", "99999", "999999", "1.0", "0x1", "١"} {
		if m, ok := parseCapacitySegment(s); ok {
			t.Errorf("parseCapacitySegment(%q) = %d, want not a capacity", s, m)
		}
	}
}

// One spelling, 16 zero-padded lower-case hex digits.
func TestFormatLeaseID(t *testing.T) {
	for id, want := range map[int64]string{
		0x694d7a1b2c3d4e5f: "694d7a1b2c3d4e5f",
		0x0aa3000000000001: "0aa3000000000001", // a member whose leases start with 0
		1:                  "0000000000000001",
		0:                  "0000000000000000",
		-1:                 "ffffffffffffffff",
	} {
		if got := FormatLeaseID(id); got != want {
			t.Errorf("FormatLeaseID(%x) = %s, want %s", id, got, want)
		}
		if back, ok := ParseLeaseID(want); !ok || back != id {
			t.Errorf("ParseLeaseID(%s) = %x, %v", want, back, ok)
		}
	}
	for _, s := range []string{"aa3000000000001", "0AA3000000000001", "0x0aa30000000001", "", "0aa30000000000010", "0aa300000000000g"} {
		if _, ok := ParseLeaseID(s); ok {
			t.Errorf("ParseLeaseID(%q) ok, want refused", s)
		}
	}
}
