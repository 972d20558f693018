package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// CheckHeld's answer and reasons, for a lease key and a --spread key.
func TestCheckHeldReasons(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	for _, opts := range []sema.Options{{}, {Spread: true, Node: "n1"}} {
		name := fmt.Sprintf("ck%v", opts.Spread)
		s := sematest.NewSem(t, c, name, 1, opts)
		h := sematest.MustAcquire(t, s)
		slot := Slot{Name: name, Max: 1, Lease: int64(h.Lease()), Rev: h.Rev()}
		if got, err := CheckHeld(t.Context(), c, slot); err != nil || got.Rank != 0 || got.Key != h.Key() || !got.TTL.Known {
			t.Fatalf("held: %+v %v", got, err)
		}
		forged := slot
		forged.Rev += 1000
		checkReason(t, c, forged, errHeldOtherRev)
		if _, err := c.Delete(t.Context(), h.Key()); err != nil {
			t.Fatal(err)
		}
		checkReason(t, c, slot, errHeldKeyGone)
		if _, err := c.Revoke(t.Context(), h.Lease()); err != nil {
			t.Fatal(err)
		}
		checkReason(t, c, slot, errHeldLeaseGone)
		_ = h.Release(t.Context()) // its lease is revoked already: nothing is left to free
	}
	s := sematest.NewSem(t, c, "ckq", 1, sema.Options{})
	h := sematest.MustAcquire(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := sematest.AcquireAsync(ctx, s)
	etcdtest.WaitKeys(t, c, schema.Prefix("ckq", 1), 2, sematest.Timeout)
	resp, err := c.Get(t.Context(), schema.Prefix("ckq", 1), clientv3.WithPrefix(), byCreateAsc)
	if err != nil {
		t.Fatal(err)
	}
	checkReason(t, c, Slot{Name: "ckq", Max: 1, Lease: resp.Kvs[1].Lease, Rev: resp.Kvs[1].CreateRevision}, errHeldNotWithin)
	sematest.Release(t, h)
	if a := <-w; a.Err != nil {
		t.Fatal(a.Err)
	} else {
		sematest.Release(t, a.H)
	}
}

func checkReason(t *testing.T, c *clientv3.Client, s Slot, reason error) {
	t.Helper()
	if _, err := CheckHeld(t.Context(), c, s); !errors.Is(err, ErrNotHeld) || !errors.Is(err, reason) {
		t.Fatalf("CheckHeld(%+v) = %v, want %v", s, err, reason)
	}
}
