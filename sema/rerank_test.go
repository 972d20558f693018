package sema

import (
	"errors"
	"testing"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// queueOf writes n keys under s's prefix, each on a lease of its own, oldest first, and returns
// them with their create revisions.
func queueOf(t *testing.T, c *clientv3.Client, s *Semaphore, n int) (keys []string, revs []int64) {
	t.Helper()
	for range n {
		g, err := c.Grant(t.Context(), 30)
		if err != nil {
			t.Fatal(err)
		}
		k := schema.LeaseKey(s.prefix, g.ID)
		p, err := c.Put(t.Context(), k, "x", clientv3.WithLease(g.ID))
		if err != nil {
			t.Fatal(err)
		}
		keys, revs = append(keys, k), append(revs, p.Header.Revision)
	}
	return keys, revs
}

// TestRerankPaths checks both reads of rerank: a holder and the head are ranked by
// the first max+1 keys alone, a waiter behind the head also gets its predecessor, and a gone
// key is ErrKeyDeleted.
func TestRerankPaths(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t).Client(t)
	s := newSem(t, c, "rerank", 2, Options{})
	keys, revs := queueOf(t, c, s, 5) // two holders, the head, two behind it
	for i, want := range []struct {
		held        bool
		holders     int
		pred        string
		rank        int
		deepReadFor bool
	}{{true, 0, "", 0, false}, {true, 0, "", 1, false}, {false, 2, "", 2, false}, {false, 0, keys[2], -1, true}, {false, 0, keys[3], -1, true}} {
		r, err := s.rerank(t.Context(), keys[i], revs[i])
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if r.held != want.held || len(r.holders) != want.holders || r.pred != want.pred || r.rank != want.rank {
			t.Errorf("key %d ranked %+v, want held %v, %d holders, predecessor %q, rank %d", i, r, want.held, want.holders, want.pred, want.rank)
		}
		if want.deepReadFor && r.predMod != revs[i-1] {
			t.Errorf("key %d: predecessor's mod revision %d, want %d", i, r.predMod, revs[i-1])
		}
	}
	if _, err := c.Delete(t.Context(), keys[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rerank(t.Context(), keys[4], revs[4]); !errors.Is(err, ErrKeyDeleted) {
		t.Errorf("rerank of a deleted key: %v, want ErrKeyDeleted", err)
	}
}

// TestRecheckBehindHead checks D1a's re-read for a waiter behind the head, which reads only its
// predecessor: nothing changed is turnNone, a rewritten or deleted predecessor is acted on
// with a fresh ranking, and our own key gone is turnKeyDeleted.
func TestRecheckBehindHead(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t).Client(t)
	s := newSem(t, c, "recheck", 1, Options{})
	keys, revs := queueOf(t, c, s, 4) // holder, head, then waiters 2 and 3
	r, err := s.rerank(t.Context(), keys[3], revs[3])
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.recheck(t.Context(), keys[3], revs[3], r); got != turnNone {
		t.Errorf("nothing changed: turn %v, want turnNone", got)
	}
	if _, err := c.Put(t.Context(), keys[2], "rewritten", clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	if got, r2 := s.recheck(t.Context(), keys[3], revs[3], r); got != turnReranked || r2.predMod <= r.rev {
		t.Errorf("predecessor rewritten: turn %v, ranking %+v, want turnReranked with the PUT", got, r2)
	}
	r, _ = s.rerank(t.Context(), keys[3], revs[3])
	if _, err := c.Delete(t.Context(), keys[2]); err != nil {
		t.Fatal(err)
	}
	got, r2 := s.recheck(t.Context(), keys[3], revs[3], r)
	if got != turnReranked || r2.pred != keys[1] {
		t.Errorf("predecessor deleted: turn %v, ranking %+v, want turnReranked behind %s", got, r2, keys[1])
	}
	if _, err := c.Delete(t.Context(), keys[3]); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.recheck(t.Context(), keys[3], revs[3], r2); got != turnKeyDeleted {
		t.Errorf("own key deleted: turn %v, want turnKeyDeleted", got)
	}
}

// BenchmarkRecheckDeep is D1a's re-read by a waiter at the back of a queue of 2,000 keys, as
// each new waiter makes it once its watches exist: the whole ranking (rerankDeep, two reads
// sorted by create revision, for which etcd reads and sorts every key of the queue) against
// the one read of the predecessor that recheck now makes there (predUnchanged); and
// the head's re-read, with both reads as before and with the first alone, as rerank does now.
func BenchmarkRecheckDeep(b *testing.B) {
	const queued = 2000
	c := etcdtest.Start(b).Client(b)
	s, err := New(c, "recheck-deep", 1, Options{TTL: DefaultTTL, FenceMargin: DefaultFenceMargin})
	if err != nil {
		b.Fatal(err)
	}
	g, err := c.Grant(b.Context(), 600)
	if err != nil {
		b.Fatal(err)
	}
	var key, head string
	var rev, headRev int64
	for i := range queued { // one lease for all: only the keys matter to the reads
		key = s.prefix + schema.FormatLeaseID(int64(i+1))
		p, err := c.Put(b.Context(), key, "x", clientv3.WithLease(g.ID))
		if err != nil {
			b.Fatal(err)
		}
		rev = p.Header.Revision
		if i == 1 { // --max 1: the second key is the head
			head, headRev = key, rev
		}
	}
	r, err := s.rerankDeep(b.Context(), key, rev)
	if err != nil || r.pred == "" {
		b.Fatalf("ranking %+v: %v", r, err)
	}
	b.Run("deep/read=both", func(b *testing.B) {
		for range b.N {
			if _, err := s.rerankDeep(b.Context(), key, rev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head/read=both", func(b *testing.B) {
		for range b.N {
			if _, err := s.rerankDeep(b.Context(), head, headRev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head/read=first", func(b *testing.B) { // rerank's read for the head
		for range b.N {
			if r, err := s.rerank(b.Context(), head, headRev); err != nil || r.holders == nil {
				b.Fatalf("head ranked %+v: %v", r, err)
			}
		}
	})
	b.Run("deep/read=predecessor", func(b *testing.B) {
		for range b.N {
			if same, err := s.predUnchanged(b.Context(), key, rev, r); err != nil || !same {
				b.Fatalf("unchanged %v: %v", same, err)
			}
		}
	})
}
