package who

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/conch-project/conch/sema/schema"
)

// FuzzWhoRender: whatever etcd holds (any key under a name, any value, any
// lease, rank and state), --who's JSON is one valid document with one
// element per key, each with the key as stored, and its text has exactly
// one line per key, with no raw control character.
func FuzzWhoRender(f *testing.F) {
	lease := schema.FormatLeaseID(0x0aa3000000000001)
	forged := `{"v":1,"host":"evil\nhr[max=2] HELD  trusted pid=1\u001b[2J\u202e","pid":1,"since":"2026-06-12T10:15:00Z"}`
	for _, s := range []struct {
		name, key, value string
		lease, rev       int64
		rank             int
	}{
		{"hr", schema.Prefix("hr", 2) + lease, forged, 0x0aa3000000000001, 8812, 0},
		{"hr", schema.Prefix("hr", 2) + "node-1", `{"v":2,"host":"n","pid":7,"since":"2026-06-12T10:15:00Z","x":1}`, 1, 8813, 2},
		{"hr", schema.NamePrefix("hr") + "01/\xff\x00", "\xff{bad", 0, 3, -1},
		{"hr", schema.Prefix("hr", 1) + "a/b", `{"since":"0000-01-01T00:00:00+01:00","held_since":"2026-06-12T10:15:00Z","scope":true}`, -1, 1, 0},
		{"bad name\n", "/conch/v1/sema/bad name\n/1/x", `{"unit":"u\u0000.service"}`, 5, 9, -1},
	} {
		f.Add(s.name, s.key, []byte(s.value), s.lease, s.rev, s.rank)
	}
	f.Fuzz(func(t *testing.T, name, key string, value []byte, lease, rev int64, rank int) {
		info := schema.ParseKey(name, key)
		e := Entry{Name: name, Key: key, Max: info.Max, Info: info, Rank: -1, Rev: rev, Lease: lease,
			Record: schema.DecodeRecord(value)}
		if info.Kind.Counted() {
			e.Rank = max(rank, 0) % (2 * info.Max)
			e.Held = e.Rank < e.Max
		}
		entries := []Entry{e, e}
		b, err := renderJSON(entries, nil, nil, nil)
		if err != nil {
			t.Fatalf("renderJSON: %v", err)
		}
		var recs []Record
		if err := json.Unmarshal(b, &recs); err != nil || len(recs) != len(entries) {
			t.Fatalf("--who --json is not one document of %d records: %v\n%s", len(entries), err, b)
		}
		if utf8.ValidString(key) && recs[0].Key != key {
			t.Fatalf("key %q shown as %q", key, recs[0].Key)
		}
		text := renderText(entries, nil)
		if n := bytes.Count(text, []byte("\n")); n != len(entries) || !bytes.HasSuffix(text, []byte("\n")) {
			t.Fatalf("%d lines for %d keys:\n%s", n, len(entries), text)
		}
		for _, c := range text {
			if c != '\n' && (c < 0x20 || c > 0x7e) {
				t.Fatalf("raw byte %#x in --who text:\n%q", c, text)
			}
		}
	})
}
