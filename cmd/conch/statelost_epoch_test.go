package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// D18, the rewind: etcd's data directory restored from a backup taken while the holder held
// (the same member and cluster token, so the same cluster ID; etcd's store goes back to the
// backup's revision, and the holder's lease, in the backup, is known again and renewed). Only
// the revision tells: the holder's keep-alives saw a higher one before. The child, which
// ignores SIGTERM, is killed at once (not after the 5 s grace), conch exits 70 with a line
// that says etcd rewound its state (its revision went back), and the waiter runs on the
// rewound store.
func TestEtcdRewindKillsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	srv := startEtcdProc(t)
	e := srv.env(t)
	pre := schema.Prefix("rw", 1)
	p, child, waiter, _ := e.deafHolderAndWaiter(t, "rw", "--", "true")
	holderLease := firstLease(createRevs(t, e, pre))

	bk := srv.backup() // etcd down for a moment: both ride it out (the holder's fence is 24 s away)
	cluster, atBackup := header(t, e)
	for i := range 20 { // the store moves on past the backup
		if _, err := e.c.Put(t.Context(), "/elsewhere/rw", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	_, moved := header(t, e)
	// The holder must have seen the store past the backup: a keep-alive answered after the
	// writes. TimeToLive's TTL is truncated, so 29 of 30 s seen at least 1 s after the writes
	// means a renewal after them (keep-alives answer with the store's revision).
	wrote := time.Now()
	var id int64
	fmt.Sscanf(holderLease, "%x", &id)
	waitFor(t, "a keep-alive of the holder after the writes", func() bool {
		r, err := e.c.TimeToLive(t.Context(), clientv3.LeaseID(id))
		return err == nil && time.Since(wrote) > 1100*time.Millisecond && r.TTL == 29
	})
	srv.restore(bk)
	t0 := time.Now()
	again, back := header(t, e)
	t.Logf("backup at revision %d, the store moved on to %d, restored: revision %d, cluster ID %016x then %016x", atBackup, moved, back, cluster, again)
	if again != cluster || back >= moved {
		t.Fatalf("the restore is not a rewind: cluster ID %016x then %016x, revision %d then %d", cluster, again, moved, back)
	}
	took := goneAfter(t, child, t0)
	t.Logf("child gone %v after etcd came back rewound (--kill-after 5s)", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("child gone only %v after etcd rewound its state: the grace was not skipped (D18)", took)
	}
	r := p.wait(t)
	if r.status != exitSlotLost || !strings.Contains(r.stderr, "etcd lost or rewound its state") ||
		!strings.Contains(r.stderr, "revision went back") || !strings.Contains(r.stderr, "without the --kill-after grace") {
		t.Errorf("holder: %v\nwant %d and a line saying etcd rewound its state (its revision went back) and the child was killed at once", r, exitSlotLost)
	}
	if w := waiter.wait(t); w.status != 0 {
		t.Errorf("waiter: %v\nwant 0: it runs on the rewound store", w)
	}
}

// D18 in a waiter: etcd rebuilt empty with a new cluster token (a new cluster ID) while a
// holder runs and a waiter queues. The waiter learns it from its own keep-alives' answers
// (the cluster ID changed), not only from its lease being unknown: its line names etcd's
// state loss, it re-enters on the new store with a key of a new lease (no stale place: no
// key of its old lease is left or waited on), and runs once the fenced holder is gone.
func TestEtcdNewClusterWaiterReenters(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	srv := startEtcdProc(t)
	e := srv.env(t)
	pre := schema.Prefix("nc", 1)
	ran := e.path("ran")
	p, child, waiter, _ := e.deafHolderAndWaiter(t, "nc", "-v", "--", "sh", "-c", `echo "$CONCH_CLUSTER_ID $CONCH_LEASE" > "$0"`, ran)
	old := createRevs(t, e, pre)
	cluster, _ := header(t, e)

	srv.rebuild("conch-new-epoch")
	t0 := time.Now()
	fresh, _ := header(t, e)
	if fresh == cluster {
		t.Fatalf("the rebuilt store kept cluster ID %016x", cluster)
	}
	took := goneAfter(t, child, t0)
	t.Logf("holder's child gone %v after etcd came back with a new cluster ID", took.Round(time.Millisecond))
	if r := p.wait(t); r.status != exitSlotLost || !strings.Contains(r.stderr, "cluster ID changed") {
		t.Errorf("holder: %v\nwant %d and a line saying etcd's cluster ID changed", r, exitSlotLost)
	}
	w := waiter.wait(t)
	if w.status != 0 || !strings.Contains(w.stderr, "lost our place in the queue") ||
		!strings.Contains(w.stderr, "etcd lost or rewound its state: its cluster ID changed") {
		t.Errorf("waiter: %v\nwant 0 after a line saying it lost its place because etcd's cluster ID changed", w)
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatalf("the waiter's child did not run: %v", err)
	}
	var id, lease string
	fmt.Sscan(string(b), &id, &lease)
	if id != schema.FormatClusterID(fresh) {
		t.Errorf("the waiter's child ran with CONCH_CLUSTER_ID %s, want the new store's %s", id, schema.FormatClusterID(fresh))
	}
	if _, stale := old[strings.TrimPrefix(lease, "0x")]; stale {
		t.Errorf("the waiter ran on its old lease %s: a stale place", lease)
	}
	if n := e.keys(pre); n != 0 {
		t.Errorf("%d keys left on the new store", n)
	}
}

// header is the cluster ID and revision of the member's answer to a read.
func header(t *testing.T, e *env) (uint64, int64) {
	t.Helper()
	var resp *clientv3.GetResponse
	waitFor(t, "etcd to answer", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var err error
		resp, err = e.c.Get(ctx, "/elsewhere/rw")
		return err == nil
	})
	return resp.Header.ClusterId, resp.Header.Revision
}
