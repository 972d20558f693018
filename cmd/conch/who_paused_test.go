package main

import (
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// D16c: a waiter that a pause holds back at the front of the queue is
// listed as what it is, WAIT flagged paused, in every form, and counted as
// a waiter, not a holder. Both kinds: one promoted under the pause (its key
// older than the pause: found by a read at its create revision) and one
// enqueued under it; holders that started before the pause stay HELD.
func TestWhoPausedHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.start("sema", "ph", "--max", "2", "--", "sh", "-c", e.gated("a"))
	b := e.start("sema", "ph", "--max", "2", "--", "sh", "-c", e.gated("b"))
	waitFor(t, "a and b hold", func() bool { return e.held("a") && e.held("b") })
	c := e.start("sema", "ph", "--max", "2", "--", "sh", "-c", e.gated("c"))
	waitFor(t, "c queued", func() bool { return e.keys(schema.Prefix("ph", 2)) == 3 })
	if r := e.run("sema", "ph", "--max", "2", "--pause", "--reason", "trial"); r.status != 0 {
		t.Fatalf("--pause: %v", r)
	}
	e.open("a")
	if r := a.wait(t); r.status != 0 {
		t.Fatal(r)
	}
	waitFor(t, "c ranks second", func() bool { return e.keys(schema.Prefix("ph", 2)) == 2 })
	r := e.run("sema", "ph", "--max", "2", "--who")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.status != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "ph[max=2] HELD") || !strings.Contains(lines[1], "holders=1/2") ||
		!strings.HasPrefix(lines[2], "ph[max=2] WAIT") || !strings.HasSuffix(lines[2], "flags=paused") {
		t.Fatalf("--who with a paused head: %v", r)
	}
	recs, _ := e.whoJSON("ph", "--max", "2")
	if len(recs) != 3 || recs[1].State != "HELD" || recs[2].State != "WAIT" || recs[2].Rank != 1 || recs[2].HeldSince != nil ||
		strings.Join(recs[2].Flags, ",") != "paused" {
		t.Fatalf("--who --json with a paused head: %+v", recs)
	}
	prom := whotest.ParseProm(t, e.run("sema", "ph", "--who", "--format", "prometheus").stdout)
	if h, w := whotest.PromValue(prom, "conch_sema_holders", "name", "ph", "max", "2"), whotest.PromValue(prom, "conch_sema_waiters", "name", "ph", "max", "2"); h != 1 || w != 1 {
		t.Fatalf("metrics: %v holders, %v waiters; want 1 and 1", h, w)
	}
	if e.held("c") {
		t.Fatal("c started while paused")
	}
	e.open("b")
	if r := b.wait(t); r.status != 0 {
		t.Fatal(r)
	}
	d := e.start("sema", "ph", "--max", "2", "--", "sh", "-c", e.gated("d")) // enqueued under the pause
	waitFor(t, "d queued", func() bool { return e.keys(schema.Prefix("ph", 2)) == 2 })
	r = e.run("sema", "ph", "--max", "2", "--who")
	if r.status != 1 || strings.Count(r.stdout, "WAIT") != 2 || strings.Count(r.stdout, "flags=paused") != 2 || strings.Contains(r.stdout, "HELD") ||
		!strings.Contains(r.stderr, "no holders for ph[max=2]: 2 waiting, held back by a pause") ||
		strings.Contains(r.stderr, "keys exist") { // only for keys under another capacity
		t.Fatalf("--who with only paused heads: %v, want 1", r)
	}
	if r := e.run("sema", "ph", "--max", "2", "--resume"); r.status != 0 {
		t.Fatal(r)
	}
	waitFor(t, "c and d start after the resume", func() bool { return e.held("c") && e.held("d") })
	if r := e.run("sema", "ph", "--max", "2", "--who"); r.status != 0 || strings.Contains(r.stdout, "paused") || strings.Count(r.stdout, "HELD") != 2 {
		t.Fatalf("--who after the resume: %v", r)
	}
	e.open("c")
	e.open("d")
	c.wait(t)
	d.wait(t)
}
