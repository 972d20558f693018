package who

import (
	"testing"

	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"
)

// markPausedHeads on keys written by hand: a key that waited and ranks
// first under the pause is marked; a holder that held at enqueue is not;
// once the waiter's create revision is compacted away it is left HELD (no
// guess hides a holder).
func TestMarkPausedHeads(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	put := func(k, v string) int64 {
		resp, err := c.Put(t.Context(), k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	rec := `{"v":1,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`
	p := schema.Prefix("mph", 2)
	put(p+schema.FormatLeaseID(1), rec) // held at enqueue
	put(p+schema.FormatLeaseID(2), rec) // held at enqueue
	put(p+schema.FormatLeaseID(3), rec) // waits: 2 ahead
	put(schema.PauseKey("mph", 2), `{"v":1,"who":"op@n","since":"2026-06-12T10:16:00Z"}`)
	if _, err := c.Delete(t.Context(), p+schema.FormatLeaseID(1)); err != nil {
		t.Fatal(err)
	}
	read := func() []Entry {
		l, err := snapshot(t.Context(), c, "mph")
		if err != nil {
			t.Fatal(err)
		}
		markPausedHeads(t.Context(), c, l)
		return l.Entries
	}
	es := read()
	if len(es) != 2 || !es[0].Held || es[0].PausedHead || es[1].Held || !es[1].PausedHead || es[1].Rank != 1 {
		t.Fatalf("entries %+v: want the holder HELD, the waiter ranked 1 held back", es)
	}
	rev := put(schema.NamePrefix("other")+"x", "{}")
	if _, err := c.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	if es := read(); !es[1].Held || es[1].PausedHead {
		t.Fatalf("after compaction: %+v, want the key left as ranked", es[1])
	}
}
