package who

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"

	"github.com/conch-project/conch/sema"
)

// FuzzAcquireBesideHostileKey writes one hostile key (any suffix under the
// name, any value) to a real etcd, then checks that acquisition and --who
// read it the same way: a --max 1 --nonblock acquisition finds no slot
// exactly when snapshot shows an entry holding capacity 1, and snapshot shows the
// key exactly as stored, with etcd's lease. One etcd per fuzzing process.
func FuzzAcquireBesideHostileKey(f *testing.F) {
	for _, s := range []struct{ suffix, value string }{
		{"1/" + schema.FormatLeaseID(1), `{"v":1,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`},
		{"1/node-1", `{"v":9,"host":"a\nb[1/1] HELD","pid":-1}`},
		{"1/", `{bad`}, {"01/" + schema.FormatLeaseID(1), `{}`}, {"1", `null`}, {"1/a/b", "\xff\x00"},
		{"+1/x", `{"since":"0000-01-01T00:00:00+01:00"}`},
	} {
		f.Add(s.suffix, []byte(s.value))
	}
	srv := etcdtest.Start(f)
	c := srv.Client(f)
	g, err := c.Grant(f.Context(), 3600)
	if err != nil {
		f.Fatal(err)
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, suffix string, value []byte) {
		name := "fz" + strconv.FormatInt(n.Add(1), 10)
		key := schema.NamePrefix(name) + suffix
		if _, err := c.Put(t.Context(), key, string(value), clientv3.WithLease(g.ID)); err != nil {
			t.Fatalf("put %q: %v", key, err)
		}
		l, err := snapshot(t.Context(), c, name)
		es := l.Entries
		if err != nil || len(es) != 1 || es[0].Key != key || es[0].Lease != int64(g.ID) {
			t.Fatalf("snapshot after putting %q = %+v, %v", key, es, err)
		}
		s, err := sema.New(c, name, 1, sema.Options{Nonblock: true, TTL: sema.DefaultTTL, ConnectTimeout: sematest.Timeout})
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Acquire(t.Context())
		if err != nil && !errors.Is(err, sema.ErrNoSlot) {
			t.Fatalf("acquire beside %q: %v", key, err)
		}
		if err == nil {
			if rerr := h.Release(t.Context()); rerr != nil {
				t.Fatal(rerr)
			}
		}
		heldByKey := es[0].Held && es[0].Max == 1
		if (err == nil) == heldByKey {
			t.Fatalf("key %q: snapshot says it holds capacity 1: %v; acquisition: %v", key, heldByKey, err)
		}
	})
}
