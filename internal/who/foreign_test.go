package who

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// On a real etcd: a key written by hand under a semaphore's queue and bound to no lease is not
// conch's (conch binds every key it writes there to a lease) and is counted in
// conch_sema_foreign_keys, beside a key in no semaphore; it still takes a slot, as acquisition
// ranks it. A key of the queue bound to a lease is not counted.
func TestForeignKeysCountLeaseless(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	ctx := t.Context()
	g, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	leased := schema.Prefix("hand", 2) + schema.FormatLeaseID(int64(g.ID))
	if _, err := c.Put(ctx, leased, "{}", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{schema.Prefix("hand", 2) + schema.FormatLeaseID(1), schema.NamePrefix("hand") + "02/x"} {
		if _, err := c.Put(ctx, k, "{}"); err != nil { // by hand: no lease
			t.Fatal(err)
		}
	}
	l, err := Read(ctx, c, "hand")
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderPrometheus(l, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fams := whotest.ParseProm(t, string(out))
	if got := whotest.PromValue(fams, "conch_sema_foreign_keys", "name", "hand"); got != 2 {
		t.Errorf("conch_sema_foreign_keys{name=\"hand\"} = %v, want 2 (the key bound to no lease, the key in no semaphore)\n%s", got, out)
	}
	if got := whotest.PromValue(fams, "conch_sema_holders", "name", "hand", "max", "2"); got != 2 {
		t.Errorf("conch_sema_holders{name=\"hand\",max=\"2\"} = %v, want 2: the key bound to no lease takes a slot all the same\n%s", got, out)
	}
}

// One rule for what is not conch's (D6g), on a real etcd: an unexpected key bound to a lease and
// a key bound to no lease named like a --spread node key are both counted by the metric and
// named by the warning, and the lease-less one is no sign of jobs run with and without
// --spread (no MixedKeys warning).
func TestNotConchsOneRule(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	ctx := t.Context()
	g, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	puts := []struct {
		key   string
		lease clientv3.LeaseID
	}{
		{schema.Prefix("one", 1) + schema.FormatLeaseID(int64(g.ID)), g.ID}, // conch's
		{schema.Prefix("one", 1) + "a/b", g.ID},                             // unexpected
		{schema.Prefix("one", 1) + "handmade", 0},                           // a node's name, no lease
	}
	for _, p := range puts {
		var opts []clientv3.OpOption
		if p.lease != 0 {
			opts = append(opts, clientv3.WithLease(p.lease))
		}
		if _, err := c.Put(ctx, p.key, "{}", opts...); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Read(ctx, c, "one")
	if err != nil {
		t.Fatal(err)
	}
	if got := foreignKeys(l)["one"]; got != 2 {
		t.Errorf("foreignKeys = %d, want 2 (the unexpected key, the key bound to no lease)", got)
	}
	var notConchs, mixed int
	for _, w := range EntryWarnings(l.Entries) {
		switch w.Kind {
		case NotConchs:
			notConchs = w.Count
		case MixedKeys:
			mixed++
		}
	}
	if notConchs != 2 || mixed != 0 {
		t.Errorf("warnings: %d keys not conch's (want 2), %d MixedKeys (want 0)", notConchs, mixed)
	}
}
