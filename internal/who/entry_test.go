package who

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
)

// Acquisition and --who agree on every key. Each hostile key is
// written alone under a fresh name; a --max 1 --nonblock acquisition must
// find no slot exactly when snapshot shows the key holding one, and snapshot shows
// the key with its real key, its real lease and its flags.
func TestListAgreesWithAcquisition(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	grant, err := c.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	other := schema.FormatLeaseID(int64(grant.ID) + 1) // a lease the key is not bound to
	for i, k := range []struct {
		suffix string // after schema.NamePrefix(name)
		leased bool
		kind   schema.KeyKind
		flags  []string
	}{
		{"1/" + schema.FormatLeaseID(int64(grant.ID)), true, schema.KeyLease, []string{"unreadable"}},
		{"1/" + other, true, schema.KeyLease, []string{"lease-mismatch", "unreadable"}},
		{"1/" + other, false, schema.KeyLease, []string{"no-lease", "unreadable"}},
		{"1/node-7", true, schema.KeySpread, []string{"unreadable"}},
		{"1/", true, schema.KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"1/a/b", true, schema.KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"1/x\n[1/1] HELD", true, schema.KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"01/" + other, true, schema.KeyForeign, []string{"foreign", "unreadable"}},
		{"+1/" + other, true, schema.KeyForeign, []string{"foreign", "unreadable"}},
		{"0/" + other, true, schema.KeyForeign, []string{"foreign", "unreadable"}},
		{"1", true, schema.KeyForeign, []string{"foreign", "unreadable"}},
		{"10001/x", true, schema.KeyForeign, []string{"foreign", "unreadable"}},
	} {
		name := "agree" + string(rune('a'+i))
		key := schema.NamePrefix(name) + k.suffix
		var opts []clientv3.OpOption
		if k.leased {
			opts = append(opts, clientv3.WithLease(grant.ID))
		}
		if _, err := c.Put(t.Context(), key, "{bad", opts...); err != nil {
			t.Fatal(err)
		}
		l, err := snapshot(t.Context(), c, name)
		es := l.Entries
		if err != nil || len(es) != 1 {
			t.Fatalf("%q: snapshot = %+v, %v; want the one key", key, es, err)
		}
		e := es[0]
		wantLease := int64(0)
		if k.leased {
			wantLease = int64(grant.ID)
		}
		if e.Key != key || e.Info.Kind != k.kind || e.Lease != wantLease || !slices.Equal(e.Flags(), k.flags) {
			t.Errorf("%q: entry kind %v lease %x flags %q; want %v %x %q", key, e.Info.Kind, e.Lease, e.Flags(), k.kind, wantLease, k.flags)
		}
		s := sematest.NewSem(t, c, name, 1, sema.Options{Nonblock: true})
		h, err := s.Acquire(t.Context())
		acquired := err == nil
		if acquired {
			sematest.Release(t, h)
		} else if !errors.Is(err, sema.ErrNoSlot) {
			t.Fatalf("%q: acquire: %v", key, err)
		}
		if acquired == e.Held || acquired == k.kind.Counted() {
			t.Errorf("%q: acquisition had a slot: %v; snapshot shows it held: %v (kind %v)", key, acquired, e.Held, k.kind)
		}
	}
}

// snapshot shows every semaphore, and keys with no valid name as foreign.
func TestListAll(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	b := sematest.MustAcquire(t, sematest.NewSem(t, c, "b", 2, sema.Options{Record: schema.Record{Host: "n1", PID: 1}}))
	defer sematest.Release(t, b)
	a := sematest.MustAcquire(t, sematest.NewSem(t, c, "a", 1, sema.Options{}))
	defer sematest.Release(t, a)
	for _, k := range []string{schema.KeyRoot + "bad name/1/x", schema.KeyRoot + "lonely"} {
		if _, err := c.Put(t.Context(), k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), sematest.Timeout)
	defer cancel()
	l, err := snapshot(ctx, c, "")
	es := l.Entries
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name+":"+e.Info.Kind.String())
	}
	want := []string{"a:lease", "b:lease", "bad name:foreign", "lonely:foreign"}
	if !slices.Equal(got, want) {
		t.Fatalf("snapshot = %q, want %q", got, want)
	}
	if !es[0].Held || es[0].Lease != int64(a.Lease()) || es[1].Record.Host != "n1" {
		t.Fatalf("snapshot entries %+v", es[:2])
	}
}

// The listing of a name with two capacities: ranks and states per capacity, as
// acquisition counts them (D6), the record as written, the holder's revision and lease.
func TestListCapacities(t *testing.T) { // D6
	_, c := sematest.StartEtcd(t)
	s2 := sematest.NewSem(t, c, "who", 2, sema.Options{Record: schema.Record{Host: "n1", PID: 42}})
	a, b := sematest.MustAcquire(t, s2), sematest.MustAcquire(t, s2)
	ctx, cancel := context.WithTimeout(t.Context(), sematest.Timeout)
	defer cancel()
	ch := sematest.AcquireAsync(ctx, sematest.NewSem(t, c, "who", 2, sema.Options{Record: schema.Record{Host: "n2", PID: 7}}))
	etcdtest.WaitKeys(t, c, schema.Prefix("who", 2), 3, sematest.Timeout)
	var others int64
	s1 := sematest.NewSem(t, c, "who", 1, sema.Options{AllowOtherCapacity: true, OnEvent: func(e sema.Event) { // D17: on purpose
		if e.Kind == sema.Enqueued {
			others = e.OtherCapacities
		}
	}})
	o := sematest.MustAcquire(t, s1)
	if others != 3 {
		t.Fatalf("OtherCapacities = %d, want 3", others)
	}
	es := list(t, c, "who")
	type row struct {
		max, rank int
		held      bool
		host      string
	}
	var got []row
	for _, e := range es {
		got = append(got, row{e.Max, e.Rank, e.Held, e.Record.Host})
	}
	want := []row{{1, 0, true, ""}, {2, 0, true, "n1"}, {2, 1, true, "n1"}, {2, 2, false, "n2"}}
	if len(got) != len(want) {
		t.Fatalf("snapshot = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("snapshot = %+v, want %+v", got, want)
		}
	}
	if es[1].Rev != a.Rev() || es[1].Lease != int64(a.Lease()) || es[1].Record.PID != 42 {
		t.Fatalf("entry %+v does not match holder rev %d lease %x", es[1], a.Rev(), a.Lease())
	}
	sematest.Release(t, a)
	r := <-ch
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// the HELD rewrite runs beside the holder's work: poll for it
	polltest.Until(t, sematest.Timeout, "the promoted waiter's held_since", func() bool {
		for _, e := range list(t, c, "who") {
			if e.Key == r.H.Key() && e.Held && e.Record.HeldSince != nil {
				return true
			}
		}
		return false
	})
	sematest.Release(t, b)
	sematest.Release(t, r.H)
	sematest.Release(t, o)
	if es := list(t, c, "who"); len(es) != 0 {
		t.Fatalf("keys left: %+v", es)
	}
}
