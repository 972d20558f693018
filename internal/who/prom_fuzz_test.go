package who

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// FuzzWhoPrometheus: whatever keys etcd holds under the queue, the
// node-wait markers and the pause keys (any name segment, any record),
// the metrics parse back with prometheus/common's own parser, one sample
// per semaphore and metric, and the --watch text block stays printable.
func FuzzWhoPrometheus(f *testing.F) {
	for _, s := range []struct{ seg, rest, value string }{
		{"enc", "2/0123456789abcdef", `{"v":1,"host":"h","pid":1,"since":"2026-06-12T10:15:00Z"}`},
		{`q"uote\`, "1/x", "\x1b[2J"},
		{"new\nline", "01/x", `{"since":"yesterday"}`},
		{"ünï😀", "1/n1", `{"held_since":"2026-06-12T10:15:00Z"}`},
		{"bad\xffutf8", "", ""},
	} {
		f.Add(s.seg, s.rest, []byte(s.value), int64(7), 1)
	}
	f.Fuzz(func(t *testing.T, seg, rest string, value []byte, rev int64, rank int) {
		now := time.Date(2026, 6, 12, 10, 20, 0, 0, time.UTC)
		key := schema.KeyRoot + seg + "/" + rest
		info := schema.ParseKey(seg, key)
		e := Entry{Name: seg, Key: key, Max: info.Max, Info: info, Rank: -1, Rev: rev, Record: schema.DecodeRecord(value)}
		if info.Kind.Counted() {
			e.Rank = max(rank, 0) % (2 * info.Max)
			e.Held = e.Rank < e.Max
		}
		if schema.ValidateName(seg) != nil {
			e.Info, e.Max, e.Rank = schema.KeyInfo{Kind: schema.KeyForeign}, 0, -1
		}
		pause := schema.Pause{Name: seg, Max: info.Max, Key: schema.PauseRoot + seg + "/" + rest, Who: string(value), Reason: string(value)}
		if schema.ValidateName(seg) != nil { // as sema reads a pause key
			pause.Max = 0
		}
		unreadable := pause // as sema decodes a record it cannot read
		unreadable.Who, unreadable.Reason, unreadable.Err, unreadable.Raw = "", "", errors.New("not a pause record"), string(value)
		l := Listing{Entries: []Entry{e}, Pauses: []schema.Pause{pause, unreadable}}
		out, err := renderPrometheus(l, now)
		if err != nil {
			t.Fatalf("renderPrometheus: %v", err)
		}
		fams := whotest.ParseProm(t, string(out))
		if e.Counted() {
			if got := whotest.PromValue(fams, "conch_sema_capacity", "name", seg, "max", strconv.Itoa(e.Max)); got != float64(e.Max) {
				t.Fatalf("capacity of %q = %v\n%s", seg, got, out)
			}
		} else if got := whotest.PromValue(fams, "conch_sema_foreign_keys", "name", labelValue(seg)); got < 1 {
			t.Fatalf("foreign keys of %q = %v\n%s", seg, got, out)
		}
		w := watcher{}
		body, err := w.body(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range string(w.stamp(body, rev, now)) {
			if c != '\n' && (c < 0x20 || c > 0x7e) {
				t.Fatalf("raw %U in the --watch block:\n%q", c, body)
			}
		}
	})
}
