package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// D7h: a lone etcd member stopped (SIGSTOP) for 8 s, 80 % of --ttl 10s, while a holder runs
// and three waiters queue: the member renews no lease while it is stopped and at its thaw
// expires every lease last renewed more than a TTL before, so the waiters must have renewed
// within the last 2 s before the stall. None loses its place (no re-entry, the same keys),
// and all run.
func TestEtcdStallKeepsWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	holder := e.start("sema", "st", "--max", "1", "--ttl", "10s", "--kill-after", "1s", "--scope=never", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "the holder", func() bool { return e.held("h") })
	var waiters []*proc
	for i := range 3 {
		waiters = append(waiters, e.start("sema", "st", "--max", "1", "--ttl", "10s", "--scope=never", "--", "sh", "-c", "echo "+strconv.Itoa(i)+" >> "+e.path("ran")))
	}
	waitFor(t, "three waiters queued", func() bool { return e.keys(schema.NamePrefix("st")) == 4 })
	e.waitRenewed(schema.NamePrefix("st")) // the waiters are in their cadence: each renewed once
	m.stall(8*time.Second, nil)            // 80 % of the TTL
	e.open("h")
	holder.wait(t) // fenced during the stall (70) or not: its child is what the test does not judge
	for i, w := range waiters {
		r := w.wait(t)
		if r.status != 0 || strings.Contains(r.stderr, "lost our place") {
			t.Errorf("waiter %d: %v\nwant 0, its place kept through an 8 s stall of etcd", i, r)
		}
	}
	if n := fileLines(e.path("ran")); n != 3 {
		t.Errorf("%d waiters ran, want 3", n)
	}
}

// D7h: a waiter whose lease a lone etcd expired at its thaw after a stall longer than the TTL
// (5 s of --ttl 3s) says that etcd stopped answering, not that conch was stalled or cut off.
func TestEtcdStallBlamesEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	holder := e.start("sema", "sb", "--max", "1", "--ttl", "3s", "--kill-after", "0.5", "--scope=never", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "the holder", func() bool { return e.held("h") })
	waiter := e.start("sema", "sb", "--max", "1", "--ttl", "3s", "--scope=never", "--", "true")
	waitFor(t, "the waiter queued", func() bool { return e.keys(schema.NamePrefix("sb")) == 2 })
	m.stall(5*time.Second, nil) // longer than the 3 s TTL
	e.open("h")
	holder.wait(t)
	r := waiter.wait(t)
	if !strings.Contains(r.stderr, "lost our place") || !strings.Contains(r.stderr, "etcd stopped answering") || strings.Contains(r.stderr, "conch was stalled") {
		t.Fatalf("waiter after a 5 s stall of etcd under --ttl 3s: %v\nwant its place lost, the line naming etcd", r)
	}
}

// waitRenewed polls etcd until the lease of every key under prefix has been renewed at
// least once since the poll began: its time to live, as etcd tells it, went up. A process
// that has sent a keep-alive since its grant keeps its lease in its steady cadence.
func (e *env) waitRenewed(prefix string) {
	e.t.Helper()
	resp, err := e.c.Get(e.t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	low := map[clientv3.LeaseID]int64{} // the least time to live seen, per lease not renewed yet
	for _, kv := range resp.Kvs {
		low[clientv3.LeaseID(kv.Lease)] = math.MaxInt64
	}
	waitFor(e.t, "every lease under "+prefix+" renewed", func() bool {
		for id, least := range low {
			r, err := e.c.TimeToLive(e.t.Context(), id)
			switch {
			case err != nil:
				return false
			case r.TTL > least:
				delete(low, id)
			default:
				low[id] = r.TTL
			}
		}
		return len(low) == 0
	})
}
