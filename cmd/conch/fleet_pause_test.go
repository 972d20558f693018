package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// D16 end to end: --pause stops new starts (a running command goes on; a
// waiter stays queued after the holder ends; --nonblock exits 75 naming
// who, when and why), --who shows it (text banner, JSON "paused"), both
// flags are idempotent with exit 0, and --resume lets the waiter start.
func TestPauseResumeCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.start("sema", "pc", "--max", "1", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	r := e.run("sema", "pc", "--max", "1", "--pause", "--reason", "black friday", "--node", "n1")
	if r.status != 0 || !strings.Contains(r.stderr, "paused: no new holder starts") {
		t.Fatalf("--pause: %v", r)
	}
	if r := e.run("sema", "pc", "--max", "1", "--pause", "--reason", "other"); r.status != 0 || !strings.Contains(r.stderr, "already paused by ") || !strings.Contains(r.stderr, "@n1") {
		t.Fatalf("second --pause: %v", r)
	}
	w := e.start("sema", "pc", "--max", "1", "--", "sh", "-c", e.gated("w"))
	waitFor(t, "w waits on the pause", func() bool {
		return strings.Contains(w.stderr.String(), ": black friday (conch sema pc --max 1 --resume")
	})
	e.open("a")
	if r := a.wait(t); r.status != 0 {
		t.Fatalf("the running holder under a pause: %v", r)
	}
	r = e.run("sema", "pc", "--max", "1", "--nonblock", "--", "true")
	if r.status != 75 || !strings.Contains(r.stderr, "no slot: paused by ") || !strings.Contains(r.stderr, ": black friday") {
		t.Fatalf("--nonblock while paused: %v, want 75 naming the pause", r)
	}
	if e.held("w") {
		t.Fatal("w started while paused")
	}
	who := e.run("sema", "pc", "--who")
	if !strings.HasPrefix(who.stdout, "PAUSED pc[max=1] paused by ") || !strings.Contains(who.stdout, "black friday") {
		t.Fatalf("--who text while paused: %v", who)
	}
	recs, _ := e.whoJSON("pc", "--max", "1")
	if len(recs) != 2 || recs[0].State != "PAUSED" || recs[0].Paused == nil || recs[0].Paused.Reason != "black friday" || recs[1].Paused == nil {
		t.Fatalf("--who --json while paused: %+v", recs)
	}
	r = e.run("sema", "pc", "--max", "1", "--resume")
	resumed := time.Now()
	if r.status != 0 || !strings.Contains(r.stderr, "resumed: waiters start again (it was paused by ") {
		t.Fatalf("--resume: %v", r)
	}
	waitFor(t, "w starts after the resume", func() bool { return e.held("w") })
	t.Logf("waiter's command started %v after --resume exited", time.Since(resumed).Round(time.Millisecond))
	e.open("w")
	if r := w.wait(t); r.status != 0 {
		t.Fatal(r)
	}
	if r := e.run("sema", "pc", "--max", "1", "--resume"); r.status != 0 || !strings.Contains(r.stderr, "not paused") {
		t.Fatalf("second --resume: %v", r)
	}
}

// D16 against a pause key written by hand with garbage: it still pauses,
// and every reader says what it found: --nonblock, --who (text and JSON);
// --resume removes it.
func TestPauseGarbageCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(schema.PauseKey("pg", 1), "\x1b[2Jnot json", 0)
	r := e.run("sema", "pg", "--max", "1", "--nonblock", "--", "true")
	if r.status != 75 || !strings.Contains(r.stderr, "unreadable pause record") || strings.Contains(r.stderr, "\x1b") {
		t.Fatalf("--nonblock with a garbage pause: %v", r)
	}
	who := e.run("sema", "pg", "--who")
	if !strings.Contains(who.stdout, "PAUSED pg[max=1] paused by an unreadable pause record") || strings.Contains(who.stdout, "\x1b") {
		t.Fatalf("--who text: %v", who)
	}
	recs, _ := e.whoJSON("pg")
	if len(recs) != 1 || recs[0].Paused == nil || recs[0].Paused.Unreadable == nil {
		t.Fatalf("--who --json: %+v", recs)
	}
	if r := e.run("sema", "pg", "--max", "1", "--resume"); r.status != 0 || e.keys(schema.PauseRoot) != 0 {
		t.Fatalf("--resume of a garbage pause: %v", r)
	}
}

// --pause, --resume and --reason refuse what they cannot go with (64,
// nothing written).
func TestPauseUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"pu", "--max", "1", "--reason", "x", "--", "true"},
		{"pu", "--max", "1", "--pause", "--resume"},
		{"pu", "--max", "1", "--pause", "--", "true"},
		{"pu", "--max", "1", "--resume", "--who"},
		{"pu", "--pause"},
	} {
		if r := e.run(append([]string{"sema"}, args...)...); r.status != 64 || r.stderr == "" {
			t.Errorf("%q: %v, want 64 with a line", args, r)
		}
	}
	if n := e.keys("/conch/"); n != 0 {
		t.Fatalf("%d keys written by refused invocations", n)
	}
}
