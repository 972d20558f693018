package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// --who --watch shows a dead holder as expiring, its TTL running down, while etcd is quiet:
// the holder's lease is not kept alive (its conch is gone) and nothing changes in etcd until
// the lease runs out. Before, the watch reprinted only on etcd's changes, so the holder
// looked healthy until its key went.
func TestWhoWatchRefreshesTTLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lease, err := e.c.Grant(t.Context(), 8)
	if err != nil {
		t.Fatal(err)
	}
	key := schema.Prefix("dead", 1) + schema.FormatLeaseID(int64(lease.ID))
	e.put(key, `{"v":1,"host":"gone","pid":1,"since":"2026-01-01T00:00:00Z"}`, lease.ID)
	w := e.start("sema", "dead", "--who", "--watch")
	defer func() { w.cmd.Process.Signal(syscall.SIGTERM); w.wait(t) }()
	waitFor(t, "the first block", func() bool { return strings.Contains(w.stdout.String(), "dead[max=1] HELD") })
	waitFor(t, "the holder shown expiring before its key goes", func() bool {
		return strings.Contains(w.stdout.String(), "expiring") || e.keys(key) == 0
	})
	if e.keys(key) == 0 && !strings.Contains(w.stdout.String(), "expiring") {
		t.Fatalf("the key went before --watch showed it expiring:\n%s", w.stdout.String())
	}
}

// --who --watch's first read is bounded by --dial-timeout: an etcd that accepts connections
// but does not answer (a cluster without quorum) is said within it. Before, it took 6.5 s
// (two tries of 1.5 s and 5 s) whatever the dial timeout.
func TestWhoWatchFirstReadWithinDialTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	members := etcdtest.StartCluster(t, 3)
	e := newEnvOn(t, members[0])
	for _, m := range members[1:] { // no quorum: members[0] accepts connections, answers no read
		m.Stop()
	}
	e.vars = append(e.vars, "CONCH_DIAL_TIMEOUT=2s")
	began := time.Now()
	p := e.start("sema", "x", "--who", "--watch")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatal("--who --watch did not give up")
	}
	took := time.Since(began)
	if r := p.res; r.status != 69 || took > 4500*time.Millisecond {
		t.Fatalf("--who --watch without quorum, --dial-timeout 2s: %v after %v, want 69 within about 2 s", r, took)
	}
	t.Logf("gave up after %v", took.Round(time.Millisecond))
}
