package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// D14: ReleaseHeld frees only this node's held-after keys: another node's
// name frees nothing, a supervised holder of the same node is never
// touched, and a second call frees none (idempotent).
func TestReleaseHeld(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	rec := schema.Record{Host: "node-a", PID: 1}
	a := sematest.MustAcquire(t, sematest.NewSem(t, c, "rel", 3, sema.Options{Record: rec}))
	if _, err := a.HoldAfter(t.Context(), time.Hour, rec); err != nil {
		t.Fatal(err)
	}
	b := sematest.MustAcquire(t, sematest.NewSem(t, c, "rel", 3, sema.Options{Record: schema.Record{Host: "node-b"}}))
	if _, err := b.HoldAfter(t.Context(), time.Hour, schema.Record{Host: "node-b"}); err != nil {
		t.Fatal(err)
	}
	running := sematest.MustAcquire(t, sematest.NewSem(t, c, "rel", 3, sema.Options{Record: rec}))
	ctx, cancel := context.WithTimeout(t.Context(), sematest.Timeout)
	defer cancel()
	if rel, err := ReleaseHeld(ctx, c, "rel", 3, "node-c"); err != nil || len(rel.Freed) != 0 {
		t.Fatalf("release as node-c: %v %v, want none", rel, err)
	}
	rel, err := ReleaseHeld(ctx, c, "rel", 3, "node-a")
	freed := rel.Freed
	if err != nil || len(freed) != 1 || freed[0].Key != a.Key() || freed[0].Rev != a.Rev() || freed[0].Ended.IsZero() {
		t.Fatalf("release as node-a: %+v %v, want %s only", freed, err, a.Key())
	}
	for key, want := range map[string]bool{a.Key(): false, b.Key(): true, running.Key(): true} {
		if _, _, _, ok := heldKV(t, c, key); ok != want {
			t.Fatalf("%s present %v after node-a's release, want %v", key, ok, want)
		}
	}
	if rel, err := ReleaseHeld(ctx, c, "rel", 3, "node-a"); err != nil || len(rel.Freed) != 0 || len(rel.Left) != 0 {
		t.Fatalf("second release: %+v %v, want none", rel, err)
	}
	if running.Context().Err() != nil {
		t.Fatalf("the supervised holder was disturbed: %v", context.Cause(running.Context()))
	}
	sematest.Release(t, running)
}
