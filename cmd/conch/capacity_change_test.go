package main

import (
	"strings"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// D17: a run naming a --max other than the live one is refused (64) before anything is
// written, with a line naming the live capacity and --change-max; with --change-max it runs
// beside the live one, warned. Before D17 it ran (a third holder of a --max 2 semaphore).
func TestRunOtherCapacityRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.start("sema", "cw", "--max", "2", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	r := e.run("sema", "cw", "--max", "3", "--", "touch", e.path("third"))
	if r.status != 64 || !strings.Contains(r.stderr, "cw is live with max=2, not max=3") || !strings.Contains(r.stderr, "--change-max") ||
		!strings.Contains(r.stderr, "Use --max 2") {
		t.Fatalf("--max 3 beside a live --max 2: %v, want 64 naming max=2 and --change-max", r)
	}
	if exists(e.path("third")) || e.keys(schema.Prefix("cw", 3)) != 0 {
		t.Fatal("the refused run started its command or left a key")
	}
	r = e.run("sema", "cw", "--max", "3", "--change-max", "--", "touch", e.path("third"))
	if r.status != 0 || !exists(e.path("third")) || !strings.Contains(r.stderr, "WARNING") {
		t.Fatalf("--max 3 --change-max: %v, want it run with a warning", r)
	}
	e.open("a")
	if r := a.wait(t); r.status != 0 {
		t.Fatal(r)
	}
	// once the old capacity drained, the new one is the live one: no flag needed
	if r := e.run("sema", "cw", "--max", "3", "--", "true"); r.status != 0 {
		t.Fatalf("--max 3 after max=2 drained: %v", r)
	}
}

// D17 for --pause, --resume and --release: a capacity other than the live one is refused
// (64, no pause key written), --change-max allows it with a warning; a --pause of a name
// with no keys at all pauses and says that nothing is queued under it. Before D17 the
// mistyped capacity printed "paused" and exited 0, freezing nothing.
func TestPauseOtherCapacityRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.start("sema", "cp", "--max", "2", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	for _, flag := range []string{"--pause", "--resume", "--release"} {
		r := e.run("sema", "cp", "--max", "3", flag)
		if r.status != 64 || !strings.Contains(r.stderr, "cp is live with max=2, not max=3") || !strings.Contains(r.stderr, "--change-max") {
			t.Errorf("%s --max 3 beside a live --max 2: %v, want 64 naming max=2", flag, r)
		}
	}
	if n := e.keys(schema.PauseRoot); n != 0 {
		t.Fatalf("%d pause keys after refused --pause", n)
	}
	r := e.run("sema", "cp", "--max", "3", "--pause", "--change-max")
	if r.status != 0 || !strings.Contains(r.stderr, "paused") || !strings.Contains(r.stderr, "also live with max=2") || e.keys(schema.PauseKey("cp", 3)) != 1 {
		t.Fatalf("--pause --max 3 --change-max: %v, want paused with a warning", r)
	}
	if r := e.run("sema", "cp", "--max", "3", "--resume", "--change-max"); r.status != 0 || e.keys(schema.PauseRoot) != 0 {
		t.Fatalf("--resume --max 3 --change-max: %v", r)
	}
	if r := e.run("sema", "cp", "--max", "2", "--pause"); r.status != 0 || strings.Contains(r.stderr, "nothing is queued") {
		t.Fatalf("--pause of the live capacity: %v", r)
	}
	e.run("sema", "cp", "--max", "2", "--resume")
	r = e.run("sema", "cp-typo", "--max", "2", "--pause", "--reason", "x")
	if r.status != 0 || !strings.Contains(r.stderr, `nothing is queued under "cp-typo"`) || e.keys(schema.PauseKey("cp-typo", 2)) != 1 {
		t.Fatalf("--pause of a name with no keys: %v, want paused, saying nothing is queued", r)
	}
	e.open("a")
	a.wait(t)
}

// D17 for the keys that outlive a run: with no job queued, a pause or a period marker under
// one capacity is what makes it the live one, so --pause, --resume and --reset-period with
// another --max are refused (64) naming it, and change nothing. Before, --resume --max 3 of
// a --max 2 freeze said "not paused" and exited 0 while the freeze stayed, and
// --reset-period --max 2 said "the period is open" while max=1's marker stayed.
func TestPauseAndMarkerElsewhereRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "frz", "--max", "2", "--pause", "--reason", "window"); r.status != 0 {
		t.Fatalf("--pause: %v", r)
	}
	for _, flag := range []string{"--pause", "--resume"} {
		r := e.run("sema", "frz", "--max", "3", flag)
		if r.status != 64 || !strings.Contains(r.stderr, "frz has its pause with max=2, not max=3") {
			t.Errorf("%s --max 3 beside a --max 2 pause: %v, want 64 naming max=2", flag, r)
		}
	}
	if e.keys(schema.PauseKey("frz", 2)) != 1 || e.keys(schema.PauseKey("frz", 3)) != 0 {
		t.Fatalf("the refused commands changed the pause keys")
	}
	if r := e.run("sema", "frz", "--max", "2", "--resume"); r.status != 0 || !strings.Contains(r.stderr, "resumed") {
		t.Fatalf("--resume of the paused capacity: %v", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--once-per", "10m", "--", "true"); r.status != 0 {
		t.Fatalf("--once-per run: %v", r)
	}
	r := e.run("sema", "ha", "--max", "2", "--reset-period")
	if r.status != 64 || !strings.Contains(r.stderr, "ha has its period marker with max=1, not max=2") {
		t.Errorf("--reset-period --max 2 beside a max=1 marker: %v, want 64 naming max=1", r)
	}
	if e.keys(schema.OnceKey("ha", 1)) != 1 {
		t.Fatalf("the refused --reset-period deleted the marker")
	}
	if r := e.run("sema", "ha", "--max", "1", "--reset-period"); r.status != 0 || !strings.Contains(r.stderr, "period open again") {
		t.Errorf("--reset-period of the marker's capacity: %v", r)
	}
}
