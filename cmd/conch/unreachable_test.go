package main

import (
	"strings"
	"testing"
	"time"
)

// D7g: a waiter whose etcd stops answering says so, rather than "next in line", within
// a few seconds, and says where it stands again once etcd is back; it keeps its place
// through an outage shorter than the TTL and runs after the holder.
func TestWaiterSaysEtcdUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	e := newEnv(t)
	holder := e.start("sema", "un", "--max", "1", "--ttl", "30s", "--scope=never", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	// no -v: etcd going silent and answering again are told all the same
	waiter := e.start("sema", "un", "--max", "1", "--ttl", "30s", "--scope=never", "--", "true")
	waitFor(t, "the waiter next in line", func() bool { return strings.Contains(waiter.stderr.String(), "next in line") })
	e.srv.Kill()
	waitFor(t, "the waiter to say etcd is not answering", func() bool {
		return strings.Contains(waiter.stderr.String(), "etcd is not answering")
	})
	time.Sleep(time.Second) // the rest of the outage
	e.srv.Revive(t)
	waitFor(t, "the waiter next in line again", func() bool { return strings.Count(waiter.stderr.String(), "next in line") == 2 })
	e.open("a")
	if r := holder.wait(t); r.status != 0 {
		t.Fatalf("holder: %v", r)
	}
	r := waiter.wait(t)
	after := r.stderr[strings.Index(r.stderr, "etcd is not answering"):]
	if r.status != 0 || strings.Contains(r.stderr, "lost our place") || !strings.Contains(after, "next in line") {
		t.Fatalf("waiter: %v\nwant 0, its place kept, and next in line again once etcd is back", r)
	}
}
