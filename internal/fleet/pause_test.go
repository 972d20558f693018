package fleet

import (
	"errors"
	"testing"

	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// D17 for SetPause: refused (nothing written) while another capacity is live, in the
// write's own Txn; SetPauseAnyCapacity writes it.
func TestSetPauseOtherCapacityRefused(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	h := sematest.MustAcquire(t, sematest.NewSem(t, c, "po", 2, sema.Options{}))
	defer sematest.Release(t, h)
	_, _, err := SetPause(t.Context(), c, "po", 3, "me@n", "")
	if !errors.Is(err, sema.ErrOtherCapacity) {
		t.Fatalf("SetPause max=3 beside max=2: %v", err)
	}
	if r, _ := c.Get(t.Context(), schema.PauseKey("po", 3)); r.Count != 0 {
		t.Fatal("the refused pause was written")
	}
	if _, wrote, err := SetPauseAnyCapacity(t.Context(), c, "po", 3, "me@n", ""); err != nil || !wrote {
		t.Fatalf("SetPauseAnyCapacity: %v %v", wrote, err)
	}
	if _, wrote, err := SetPause(t.Context(), c, "po", 2, "me@n", ""); err != nil || !wrote {
		t.Fatalf("SetPause of the live capacity: %v %v", wrote, err)
	}
}

// D16: a second pause changes nothing and says so (the first pause's author and reason stay),
// and a second resume finds nothing to remove.
func TestPauseResumeIdempotent(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	ctx := t.Context()
	p, wrote, err := SetPause(ctx, c, "pi", 2, "root@node-a", "freeze")
	if err != nil || !wrote || p.Who != "root@node-a" {
		t.Fatalf("SetPause: %+v %v %v", p, wrote, err)
	}
	p, again, err := SetPause(ctx, c, "pi", 2, "other@b", "x")
	if err != nil || again || p.Who != "root@node-a" || p.Reason != "freeze" {
		t.Fatalf("second SetPause: %+v wrote %v %v; want the first pause kept, nothing written", p, again, err)
	}
	if _, had, err := Resume(ctx, c, "pi", 2); err != nil || !had {
		t.Fatalf("Resume: %v %v, want the pause removed", had, err)
	}
	if _, had, err := Resume(ctx, c, "pi", 2); err != nil || had {
		t.Fatalf("second Resume: %v %v, want none", had, err)
	}
}
