package sema

import (
	"context"
	"errors"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Acquisition and --who agree on every key. Each hostile key is
// written alone under a fresh name; a --max 1 --nonblock acquisition must
// find no slot exactly when List shows the key holding one, and List shows
// the key with its real key, its real lease and its flags.
func TestListAgreesWithAcquisition(t *testing.T) {
	_, c := startEtcd(t)
	grant, err := c.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	other := FormatLeaseID(int64(grant.ID) + 1) // a lease the key is not bound to
	for i, k := range []struct {
		suffix string // after NamePrefix(name)
		leased bool
		kind   KeyKind
		flags  []string
	}{
		{"1/" + FormatLeaseID(int64(grant.ID)), true, KeyLease, []string{"unreadable"}},
		{"1/" + other, true, KeyLease, []string{"lease-mismatch", "unreadable"}},
		{"1/" + other, false, KeyLease, []string{"no-lease", "unreadable"}},
		{"1/node-7", true, KeySpread, []string{"unreadable"}},
		{"1/", true, KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"1/a/b", true, KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"1/x\n[1/1] HELD", true, KeyUnexpected, []string{"unexpected", "unreadable"}},
		{"01/" + other, true, KeyForeign, []string{"foreign", "unreadable"}},
		{"+1/" + other, true, KeyForeign, []string{"foreign", "unreadable"}},
		{"0/" + other, true, KeyForeign, []string{"foreign", "unreadable"}},
		{"1", true, KeyForeign, []string{"foreign", "unreadable"}},
		{"10001/x", true, KeyForeign, []string{"foreign", "unreadable"}},
	} {
		name := "agree" + string(rune('a'+i))
		key := NamePrefix(name) + k.suffix
		var opts []clientv3.OpOption
		if k.leased {
			opts = append(opts, clientv3.WithLease(grant.ID))
		}
		if _, err := c.Put(t.Context(), key, "{bad", opts...); err != nil {
			t.Fatal(err)
		}
		es, err := List(t.Context(), c, name)
		if err != nil || len(es) != 1 {
			t.Fatalf("%q: List = %+v, %v; want the one key", key, es, err)
		}
		e := es[0]
		wantLease := int64(0)
		if k.leased {
			wantLease = int64(grant.ID)
		}
		if e.Key != key || e.Info.Kind != k.kind || e.Lease != wantLease || !slices.Equal(e.Flags(), k.flags) {
			t.Errorf("%q: entry kind %v lease %x flags %q; want %v %x %q", key, e.Info.Kind, e.Lease, e.Flags(), k.kind, wantLease, k.flags)
		}
		s := newSem(t, c, name, 1, Options{Nonblock: true})
		h, err := s.Acquire(t.Context())
		acquired := err == nil
		if acquired {
			release(t, h)
		} else if !errors.Is(err, ErrNoSlot) {
			t.Fatalf("%q: acquire: %v", key, err)
		}
		if acquired == e.Held || acquired == k.kind.Counted() {
			t.Errorf("%q: acquisition had a slot: %v; List shows it held: %v (kind %v)", key, acquired, e.Held, k.kind)
		}
	}
}

// ListAll shows every semaphore, and keys with no valid name as foreign.
func TestListAll(t *testing.T) {
	_, c := startEtcd(t)
	b := mustAcquire(t, newSem(t, c, "b", 2, Options{Record: Record{Host: "n1", PID: 1}}))
	defer release(t, b)
	a := mustAcquire(t, newSem(t, c, "a", 1, Options{}))
	defer release(t, a)
	for _, k := range []string{KeyRoot + "bad name/1/x", KeyRoot + "lonely"} {
		if _, err := c.Put(t.Context(), k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	es, err := ListAll(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name+":"+e.Info.Kind.String())
	}
	want := []string{"a:lease", "b:lease", "bad name:foreign", "lonely:foreign"}
	if !slices.Equal(got, want) {
		t.Fatalf("ListAll = %q, want %q", got, want)
	}
	if !es[0].Held || es[0].Lease != int64(a.Lease()) || es[1].Record.Host != "n1" {
		t.Fatalf("ListAll entries %+v", es[:2])
	}
}
