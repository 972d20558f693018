package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
)

// D17 for a slot a lock server takes (TakeHeld, TakeHeldQueued): refused, nothing written,
// while a run of another capacity holds under the name, naming that capacity; a node that
// already holds here keeps its answer; a foreign key (D6g) refuses nothing.
func TestTakeHeldOtherCapacity(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	ctx := t.Context()
	job := sematest.MustAcquire(t, sematest.NewSem(t, c, "oc", 2, sema.Options{}))
	for _, take := range []struct {
		what string
		f    func() (Take, error)
	}{
		{"TakeHeld", func() (Take, error) { return TakeHeld(ctx, c, "oc", 1, "node-b", time.Hour, schema.Record{}) }},
		{"TakeHeldQueued", func() (Take, error) {
			return TakeHeldQueued(ctx, c, "oc", 1, "node-b", time.Hour, time.Minute, schema.Record{})
		}},
	} {
		tk, err := take.f()
		if err != nil || tk.Result != TakeOtherCapacity || !slices.Equal(tk.Capacities, []int{2}) {
			t.Errorf("%s of oc[max=1] beside a max=2 job: %+v %v, want TakeOtherCapacity naming [2]", take.what, tk, err)
		}
		if n := etcdtest.KeysUnder(t, c, schema.Prefix("oc", 1)); n != 0 {
			t.Errorf("%s: %d keys under max=1 after the refusal", take.what, n)
		}
	}
	sematest.Release(t, job)
	held, err := TakeHeld(ctx, c, "oc", 1, "node-b", time.Hour, schema.Record{})
	if err != nil || held.Result != TakeGranted {
		t.Fatalf("TakeHeld once max=2 drained: %+v %v", held, err)
	}
	other := sematest.MustAcquire(t, sematest.NewSem(t, c, "oc", 3, sema.Options{AllowOtherCapacity: true}))
	if again, err := TakeHeld(ctx, c, "oc", 1, "node-b", time.Hour, schema.Record{}); err != nil || again.Result != TakeAlreadyHeld {
		t.Errorf("the holder asking again beside a max=3 run: %+v %v, want TakeAlreadyHeld", again, err)
	}
	if tk, err := TakeHeld(ctx, c, "oc", 1, "node-c", time.Hour, schema.Record{}); err != nil || tk.Result != TakeOtherCapacity || !slices.Equal(tk.Capacities, []int{3}) {
		t.Errorf("another node beside max=1 and max=3 keys: %+v %v, want TakeOtherCapacity naming [3] only", tk, err)
	}
	sematest.Release(t, other)

	if _, err := c.Put(ctx, schema.NamePrefix("fk")+"01/x", "junk"); err != nil {
		t.Fatal(err)
	}
	if tk, err := TakeHeld(ctx, c, "fk", 1, "node-a", time.Hour, schema.Record{}); err != nil || tk.Result != TakeGranted {
		t.Errorf("TakeHeld beside a foreign key: %+v %v, want TakeGranted", tk, err)
	}
}

// A slot taken by TakeHeld and a run of another capacity racing on an empty name never both
// hold: either the run's enqueue counts the slot's key (refused), or the slot's write finds
// the run's key (its Txn fails on a key written since its read) and decides again.
func TestTakeHeldCapacityRace(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	for i := range 20 {
		name := fmt.Sprintf("race%d", i)
		var wg sync.WaitGroup
		var tk Take
		var tkErr, runErr error
		var h *sema.Holder
		run := sematest.NewSem(t, c, name, 2, sema.Options{}) // here: it may fail the test
		wg.Go(func() { tk, tkErr = TakeHeld(t.Context(), c, name, 1, "node-a", time.Hour, schema.Record{}) })
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), sematest.Timeout)
			defer cancel()
			h, runErr = run.Acquire(ctx)
		})
		wg.Wait()
		if tkErr != nil || (runErr != nil && !errors.Is(runErr, sema.ErrOtherCapacity)) {
			t.Fatalf("round %d: TakeHeld %v, Acquire %v", i, tkErr, runErr)
		}
		if tk.Result == TakeGranted && h != nil {
			t.Fatalf("round %d: a reboot slot of max=1 and a run of max=2 both hold", i)
		}
		if tk.Result != TakeGranted && h == nil {
			t.Errorf("round %d: neither holds (TakeHeld %+v, Acquire %v)", i, tk, runErr)
		}
		if h != nil {
			sematest.Release(t, h)
		}
	}
}
