package who

import (
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// held_since is in every JSON record: a holder's slot time (its since when it never waited,
// so never rewrote its key), null for a waiter (operator trial: scripts reading
// x["held_since"] failed on holders that found a slot free).
func TestWhoRecordHeldSince(t *testing.T) {
	joined := time.Date(2026, 6, 12, 10, 15, 0, 0, time.UTC)
	promoted := joined.Add(3 * time.Second)
	entry := func(held bool, heldSince *time.Time) Entry {
		return Entry{Name: "x", Max: 1, Info: schema.KeyInfo{Kind: schema.KeyLease, Max: 1}, Held: held, Rev: 7,
			Record: schema.ReadRecord{Record: schema.Record{Version: 1, Host: "n1", PID: 1, Since: joined, HeldSince: heldSince}}}
	}
	for _, tc := range []struct {
		name string
		e    Entry
		want string // "" for null
	}{
		{"held at once", entry(true, nil), joined.Format(time.RFC3339)},
		{"held after a wait", entry(true, &promoted), promoted.Format(time.RFC3339)},
		{"waiting", entry(false, nil), ""},
	} {
		got := toRecord(tc.e, nil).HeldSince
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: held_since %q, want null", tc.name, *got)
		case tc.want != "" && (got == nil || *got != tc.want):
			t.Errorf("%s: held_since %v, want %s", tc.name, got, tc.want)
		}
	}
}
