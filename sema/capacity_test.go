package sema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// D17: Acquire under a capacity other than the live one is refused with a *CapacityError
// naming the live capacities, and writes nothing; AllowOtherCapacity enqueues beside them.
func TestAcquireOtherCapacityRefused(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	h := mustAcquire(t, newSem(t, c, "oc", 2, Options{}))
	_, err := newSem(t, c, "oc", 3, Options{}).Acquire(t.Context())
	var ce *CapacityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrOtherCapacity) || !slices.Equal(ce.Live, []int{2}) || ce.Max != 3 {
		t.Fatalf("Acquire --max 3 beside max=2: %v, want a *CapacityError naming [2]", err)
	}
	if n := keyCount(t, c, newSem(t, c, "oc", 3, Options{})); n != 0 {
		t.Fatalf("%d keys under max=3 after the refusal", n)
	}
	o := mustAcquire(t, newSem(t, c, "oc", 3, Options{AllowOtherCapacity: true}))
	release(t, o)
	release(t, h)
	release(t, mustAcquire(t, newSem(t, c, "oc", 3, Options{}))) // drained: max=3 is free to be the one
}

// D17's check is in the enqueue's Txn: two capacities racing on an empty name never both
// get keys, whichever comes first.
func TestCapacityRaceOneWins(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	for i := range 20 {
		name := fmt.Sprintf("race%d", i)
		var wg sync.WaitGroup
		held := make([]*Holder, 2)
		errs := make([]error, 2)
		for j, m := range []int{2, 3} {
			s := newSem(t, c, name, m, Options{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				held[j], errs[j] = s.Acquire(t.Context())
			}()
		}
		wg.Wait()
		ok := 0
		for j := range held {
			if held[j] != nil {
				ok++
				release(t, held[j])
			} else if !errors.Is(errs[j], ErrOtherCapacity) {
				t.Fatalf("round %d: %v", i, errs[j])
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d capacities held at once, want exactly 1", i, ok)
		}
	}
}

// Keys under the name that are not conch's (D6g: a non-canonical segment, a key bound to no
// lease) make no capacity live: LiveCapacities steps over them to the keys conch wrote, and
// a run beside them is not refused and hears of no other capacity. Before D6g was applied
// here, the key bound to no lease under max=4 made max=4 live and refused the run.
func TestCapacityForeignKeyNotRefused(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	g, err := c.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	for key, lease := range map[string]clientv3.LeaseID{
		schema.NamePrefix("fk") + "01/x":                         0,
		schema.NamePrefix("fk") + "4/" + schema.FormatLeaseID(1): 0,    // by hand, in a queue
		schema.NamePrefix("fk") + "5/" + schema.FormatLeaseID(1): g.ID, // a leftover key of max=5
	} {
		if _, err := c.Put(t.Context(), key, "x", clientv3.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
	}
	caps, _, err := LiveCapacities(t.Context(), c, "fk")
	if err != nil || !slices.Equal(caps, []int{5}) {
		t.Fatalf("LiveCapacities = %v, %v; want [5]", caps, err)
	}
	if _, err := c.Delete(t.Context(), schema.NamePrefix("fk")+"5/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var log eventLog
	h, err := newSem(t, c, "fk", 1, Options{OnEvent: log.add}).Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire beside keys that are not conch's: %v", err)
	}
	if e := log.waitFor(t, "Enqueued", func(e Event) bool { return e.Kind == Enqueued }); e.OtherCapacities != 0 {
		t.Fatalf("Enqueued beside keys that are not conch's: OtherCapacities %d, want 0", e.OtherCapacities)
	}
	release(t, h)
}
