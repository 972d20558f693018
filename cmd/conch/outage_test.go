package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// slotBackBound is the bound README states for a slot to be busy again once etcd answers
// after an outage shorter than the TTL that fenced its holder (D7b): the fenced holder's
// revoke, retried until etcd answers (gRPC's reconnect back-off after a long outage is part
// of it: 3.1 s was seen on a loaded machine), then the hand-off to the head of the queue.
const slotBackBound = 5 * time.Second

// D7b (5) and the release retry: etcd SIGKILLed under one holder and five waiters (default
// --ttl 10s and --kill-after 5s) and started again 2 s, then 4 s later on the same data and
// port, then 7 s later (still shorter than the TTL, but past the deadline of every waiter on
// the slow TTL/3 cadence). No waiter loses its place (the same keys and create revisions afterwards), and the
// slot is busy again soon after etcd answers: the holder still runs, or a fenced holder's
// release went through and the head of the queue holds. The figures are printed.
func TestEtcdRestartKeepsQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	for _, down := range []time.Duration{2 * time.Second, 4 * time.Second, 7 * time.Second} {
		t.Run(down.String(), func(t *testing.T) { etcdRestartKeepsQueue(t, down) })
	}
}

func etcdRestartKeepsQueue(t *testing.T, down time.Duration) {
	srv := startEtcdProc(t)
	e := srv.env(t)
	pre := schema.Prefix("out", 1)
	var procs []*proc
	for i := range 6 { // the first holds, five wait
		name := fmt.Sprint("p", i)
		procs = append(procs, e.start("sema", "out", "--max", "1", "--scope=never", "--",
			"sh", "-c", `echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; `+e.gated(name), e.path(name+".pid")))
		waitFor(t, "the key of conch "+name, func() bool { return e.keys(pre) == i+1 })
	}
	holder := readPID(t, e.path("p0.pid"))
	before := createRevs(t, e, pre)
	srv.kill()
	killed := time.Now()
	time.Sleep(down) // the outage itself, not a synchronisation
	srv.start()
	back := time.Now()
	// The holder is fenced by back + its fence margin (6 s) or never: its next keep-alive,
	// once etcd answers, confirms its lease.
	waitFor(t, "the holder's fate", func() bool { return !pidAlive(holder) || time.Since(back) > 6*time.Second })
	busy := time.Duration(0) // the holder's child still runs: the slot was never idle after etcd's return
	if !pidAlive(holder) {
		waitFor(t, "the head of the queue to start", func() bool { return exists(e.path("p1.pid")) })
		busy = time.Since(back)
	}
	t.Logf("etcd down %v (unreachable %v): slot busy again %v after etcd answered; holder: %s",
		down, back.Sub(killed).Round(time.Millisecond), busy.Round(time.Millisecond), strings.TrimSpace(procs[0].stderr.String()))
	if busy > slotBackBound {
		t.Errorf("slot busy again %v after etcd answered, want within %v", busy, slotBackBound)
	}
	after := createRevs(t, e, pre)
	for lease, rev := range before {
		if _, held := after[lease]; !held && lease == firstLease(before) {
			continue // the holder, fenced and released
		}
		if after[lease] != rev {
			t.Errorf("key of lease %s: create revision %d before the outage, %d after (lost its place)", lease, rev, after[lease])
		}
	}
	for i, p := range procs {
		if strings.Contains(p.stderr.String(), "lost our place") {
			t.Errorf("conch %d lost its place: %s", i, p.stderr.String())
		}
	}
	for i := range procs {
		e.open(fmt.Sprint("p", i))
	}
	for _, p := range procs {
		p.wait(t)
	}
}

// createRevs maps each key's lease (its suffix) under prefix to its create revision.
func createRevs(t *testing.T, e *env, prefix string) map[string]int64 {
	t.Helper()
	resp, err := e.c.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, kv := range resp.Kvs {
		m[strings.TrimPrefix(string(kv.Key), prefix)] = kv.CreateRevision
	}
	return m
}

// firstLease is the suffix of the oldest key in revs (the holder's).
func firstLease(revs map[string]int64) string {
	first, min := "", int64(0)
	for l, r := range revs {
		if first == "" || r < min {
			first, min = l, r
		}
	}
	return first
}
