package schema

import (
	"strconv"
	"strings"
)

// KeyKind says what a key under a semaphore name's prefix is, as both
// acquisition and the listing (internal/who) see it: they use this one parser and agree on every
// key.
//
// The schema is KeyRoot + <name> + "/" + <max> + "/" + <suffix> (04_sema.md,
// D11). Acquisition ranks every key under Prefix(name, max), whatever its
// suffix: a key there occupies a rank (D11: "a key is a slot claim whatever
// its suffix"). So:
//
//   - <max> is a capacity segment only in its canonical spelling, the one
//     Prefix writes: decimal 1..MaxCapacity, no sign, no leading zero, no
//     space. Under "/conch/v1/sema/x/01/" no conch ever ranks, so a key there
//     is KeyForeign: listed, counted by nobody.
//   - with a canonical <max>, the suffix decides the kind: 16 lower-case hex
//     digits is a lease key (KeyLease, what conch writes without Spread);
//     a suffix matching the name rule of D4 is a node key (KeySpread, D11);
//     anything else (empty, upper-case or short hex that is not a name, a
//     further "/", control characters) is KeyUnexpected. All three are
//     counted by acquisition and by the listing, which flags the unexpected ones.
type KeyKind int

// Key kinds. Counted reports which of them take a rank.
const (
	// KeyForeign: under the name's prefix but not under any Prefix(name,
	// max): no canonical capacity segment. Never counted.
	KeyForeign KeyKind = iota
	// KeyLease: <max>/<16 lower-case hex digits>, a lease-suffixed key.
	KeyLease
	// KeySpread: <max>/<node>, node matching D4's name rule (D11).
	KeySpread
	// KeyUnexpected: under Prefix(name, max) with a suffix that is neither;
	// still counted, since acquisition ranks every key under the prefix.
	KeyUnexpected
)

// String is the kind's name as the JSON listing and docs spell it.
func (k KeyKind) String() string {
	switch k {
	case KeyLease:
		return "lease"
	case KeySpread:
		return "spread"
	case KeyUnexpected:
		return "unexpected"
	default:
		return "foreign"
	}
}

// Counted reports whether a key of kind k occupies a rank in its capacity's
// queue, for acquisition as for the listing.
func (k KeyKind) Counted() bool { return k != KeyForeign }

// ConchWrote reports whether a key of kind k that etcd binds to lease
// (KeyValue.Lease, 0 for none) is one conch writes (D6g): a lease key or a node
// key, bound to a lease. Any other key under a name (foreign, unexpected, or
// bound to no lease: written by hand or by another program) is not conch's: it
// tells neither how jobs run (D11's mix of lease and node keys) nor which
// capacity is live (D17), though one in a queue still takes its rank (Counted).
func ConchWrote(k KeyKind, lease int64) bool {
	return (k == KeyLease || k == KeySpread) && lease != 0
}

// KeyInfo is what ParseKey reads from a key's name alone. The lease a key is
// really bound to is etcd's (KeyValue.Lease), never NameLease.
type KeyInfo struct {
	Kind KeyKind
	// Max is the capacity whose queue the key is in; 0 for KeyForeign.
	Max int
	// Suffix is the part after Prefix(name, Max); for KeyForeign, the part
	// after NamePrefix(name).
	Suffix string
	// NameLease is the lease ID spelled by a KeyLease suffix, else 0.
	NameLease int64
}

// ParseKey classifies key, read from under NamePrefix(name), by the rules of
// KeyKind. It does no I/O and never fails: a key not under NamePrefix(name)
// at all is KeyForeign with Suffix the whole key.
func ParseKey(name, key string) KeyInfo {
	rest, ok := strings.CutPrefix(key, NamePrefix(name))
	if !ok {
		return KeyInfo{Kind: KeyForeign, Suffix: key}
	}
	seg, suffix, ok := strings.Cut(rest, "/")
	max, canon := parseCapacitySegment(seg)
	if !ok || !canon {
		return KeyInfo{Kind: KeyForeign, Suffix: rest}
	}
	info := KeyInfo{Kind: KeyUnexpected, Max: max, Suffix: suffix}
	if id, ok := ParseLeaseID(suffix); ok {
		info.Kind, info.NameLease = KeyLease, id
	} else if ValidateName(suffix) == nil {
		info.Kind = KeySpread
	}
	return info
}

// parseCapacitySegment reports the capacity a key's <max> segment names and
// whether it is canonical: the spelling strconv.Itoa gives 1..MaxCapacity,
// which is what Prefix writes and so the only one acquisition ever ranks.
// "01", "+1", "0", "1e3" and "10001" are not capacity segments. (ParseMax,
// for a capacity given by a person, also takes "007": that may be spelled freely, a key
// segment may not.)
func parseCapacitySegment(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxCapacity {
		return 0, false
	}
	return n, true
}

// leaseIDLen is the length of a lease ID's one spelling (FormatLeaseID).
const leaseIDLen = 16

// FormatLeaseID is the one spelling of a lease ID: 16 lower-case
// hex digits, zero-padded, as etcdctl prints lease IDs (`lease grant`, `lease
// list`). Key names, the slot's environment, the listing and the journal all use it, so an
// ID read anywhere can be pasted into etcdctl or into a key name. etcd's
// lease IDs are positive int64 (etcdserver masks the top bit); a negative id
// is spelled as its two's complement all the same.
func FormatLeaseID(id int64) string {
	const hex = "0123456789abcdef"
	var b [leaseIDLen]byte
	u := uint64(id)
	for i := leaseIDLen - 1; i >= 0; i-- {
		b[i] = hex[u&0xf]
		u >>= 4
	}
	return string(b[:])
}

// ParseLeaseID parses FormatLeaseID's spelling, and only it: exactly 16
// lower-case hex digits. ok is false for anything else (unpadded, upper-case,
// "0x" prefixed).
func ParseLeaseID(s string) (id int64, ok bool) {
	if len(s) != leaseIDLen {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return int64(u), true
}
