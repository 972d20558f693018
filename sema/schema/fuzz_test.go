package schema

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseKey: the parser agrees with acquisition, which ranks every key
// under Prefix(name, max). For any key: it is counted for m
// exactly when it lies under Prefix(name, m), at most one m exists, and a
// lease key's suffix is FormatLeaseID of the lease it names.
func FuzzParseKey(f *testing.F) {
	lease := FormatLeaseID(0x0aa3000000000001)
	for _, k := range []string{Prefix("x", 1) + lease, Prefix("x", 10000) + "node-1", Prefix("x", 2),
		NamePrefix("x") + "01/" + lease, NamePrefix("x") + "+1/a", NamePrefix("x") + "1", "/other",
		Prefix("x", 3) + "a/b\n[3/3] HELD", Prefix("x", 3) + strings.ToUpper(lease), NamePrefix("x") + "\xff/a"} {
		f.Add("x", k)
	}
	f.Fuzz(func(t *testing.T, name, key string) {
		info := ParseKey(name, key)
		// the one capacity whose prefix holds key, found without the parser
		under := 0
		if rest, ok := strings.CutPrefix(key, NamePrefix(name)); ok {
			seg, _, _ := strings.Cut(rest, "/")
			if m, err := strconv.Atoi(seg); err == nil && m >= 1 && m <= MaxCapacity && strings.HasPrefix(key, Prefix(name, m)) {
				under = m
			}
		}
		if info.Kind.Counted() != (under != 0) || info.Max != under {
			t.Fatalf("ParseKey(%q, %q) = %+v; acquisition ranks it under capacity %d", name, key, info, under)
		}
		if info.Kind == KeyLease && FormatLeaseID(info.NameLease) != info.Suffix {
			t.Fatalf("lease key %q: suffix %q, lease %x", key, info.Suffix, info.NameLease)
		}
		if info.Kind == KeySpread && ValidateName(info.Suffix) != nil {
			t.Fatalf("spread key %q with a node suffix %q that is not a name", key, info.Suffix)
		}
	})
}

// FuzzDecodeRecord: any value, hostile or of another format version, is
// read without panic; what decoded can always be encoded again (a record
// that decodes but does not re-encode would hide every holder from a JSON
// listing); fields are reported missing or bad, never both, and only known
// ones.
func FuzzDecodeRecord(f *testing.F) {
	cur := Record{Version: 1, Host: "node2", PID: 4242, Since: time.Date(2026, 6, 12, 10, 15, 0, 0, time.UTC), Unit: "a.service"}
	for _, s := range []string{cur.Encode(), `{}`, `{"v":2,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z","new":{"x":[1]}}`,
		`{"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`, `{"v":1,"since":"0000-01-01T00:00:00+01:00"}`,
		`{"v":"1","pid":1e99,"host":null}`, `{bad`, `null`, `[]`, `"x"`, `{"host":"a\nb\u001b[2J"}`,
		`{"held_since":"9999-12-31T23:59:59-01:00"}`, `{"v":1,"v":2}`} {
		f.Add([]byte(s))
	}
	known := map[string]bool{"v": true, "host": true, "pid": true, "since": true, "held_since": true, "unit": true, "scope": true}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := DecodeRecord(b)
		if r.Err != nil {
			if r.Record != (Record{}) || r.Missing != nil || r.Bad != nil {
				t.Fatalf("unreadable record with fields set: %+v", r)
			}
			return
		}
		if _, err := json.Marshal(r.Record); err != nil {
			t.Fatalf("record %q decodes but does not re-encode: %v", b, err)
		}
		seen := map[string]bool{}
		for _, f := range append(append([]string{}, r.Missing...), r.Bad...) {
			if !known[f] || seen[f] {
				t.Fatalf("field %q reported twice or unknown: %+v", f, r)
			}
			seen[f] = true
		}
		if r.Newer != (r.Version > RecordVersion) || r.PID < 0 {
			t.Fatalf("record %+v", r)
		}
	})
}

// FuzzRecordRoundTrip: what conch writes, it reads back unchanged and
// without flags, whatever the host and unit names hold.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("node2", 4242, "conch-worker.service", int64(1781259300), true)
	f.Add("a\nb\x1b[2J\xff", 1, "", int64(0), false)
	f.Fuzz(func(t *testing.T, host string, pid int, unit string, sec int64, scope bool) {
		since := time.Unix(sec%253402300799, 0).UTC() // years 1970..9999
		if since.Year() < 0 || pid <= 0 || pid > maxPID || !utf8Valid(host) || !utf8Valid(unit) {
			return // not what conch writes (JSON replaces invalid UTF-8); no t.Skip: CI fails on skips
		}
		in := Record{Version: RecordVersion, Host: host, PID: pid, Since: since, Unit: unit, Scope: scope}
		r := DecodeRecord([]byte(in.Encode()))
		if r.Err != nil || r.Missing != nil || r.Bad != nil || r.Newer || r.Record.Host != in.Host ||
			r.PID != in.PID || !r.Since.Equal(in.Since) || r.Unit != in.Unit || r.Scope != in.Scope {
			t.Fatalf("wrote %+v, read back %+v", in, r)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
