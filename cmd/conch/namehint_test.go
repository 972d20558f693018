package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// A name one edit off a live one, with no keys and no pause of its own, gets a "did you mean"
// line: a run still runs, a --pause still pauses (pausing ahead of a window is legitimate,
// D17), --release and --resume still answer 0, and --who NAME says there is no such
// semaphore. A name in use, or with nothing near, gets none.
func TestNameTypoHint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "batch-worker", "--max", "2", "--", "sh", "-c", e.gated("bw"))
	waitFor(t, "the live holder", func() bool { return e.held("bw") })
	defer func() { e.open("bw"); holder.wait(t) }()
	const hint = `did you mean "batch-worker"?`

	r := e.run("sema", "batch-wroker", "--max", "2", "--", "sh", "-c", "echo ran")
	if r.status != 0 || r.stdout != "ran\n" || !strings.Contains(r.stderr, `nothing is queued under "batch-wroker"`) || !strings.Contains(r.stderr, hint) {
		t.Errorf("run of a typo: %v\nwant it run, with %q on stderr", r, hint)
	}
	r = e.run("sema", "batch-wroker", "--max", "2", "--pause", "--reason", "window")
	if r.status != 0 || !strings.Contains(r.stderr, "paused") || !strings.Contains(r.stderr, hint) || e.keys(schema.PauseKey("batch-wroker", 2)) != 1 {
		t.Errorf("--pause of a typo: %v\nwant it paused, with %q", r, hint)
	}
	if r = e.run("sema", "batch-wroker", "--max", "2", "--resume"); r.status != 0 || !strings.Contains(r.stderr, "resumed") {
		t.Errorf("--resume: %v", r)
	}
	r = e.run("sema", "batch-wroker", "--max", "2", "--release")
	if r.status != 0 || !strings.Contains(r.stderr, "nothing to release; no such semaphore: "+hint) {
		t.Errorf("--release of a typo: %v\nwant %q", r, hint)
	}
	r = e.run("sema", "batch-wroker", "--who")
	if r.status != 1 || !strings.Contains(r.stderr, "no holders or waiters for batch-wroker; no such semaphore: "+hint) {
		t.Errorf("--who of a typo: %v\nwant status 1 and %q", r, hint)
	}
	// no hint: the live name itself, and a name two edits away
	for _, args := range [][]string{
		{"sema", "batch-worker", "--max", "2", "--", "true"},
		{"sema", "batch-wroker2", "--max", "2", "--", "true"},
		{"sema", "batch-wroker2", "--who"},
	} {
		if r := e.run(args...); strings.Contains(r.stderr, "did you mean") {
			t.Errorf("%q: %v\nwant no hint", args, r)
		}
	}
}

// nearNames keeps the names one edit away (insertion, deletion, substitution, two neighbours
// swapped), never the name itself, at most maxHinted.
func TestNearNames(t *testing.T) {
	live := []string{"batch-worker", "batch-workers", "batch-worke", "batch-wroker", "batchworker", "other", "batch-worker"}
	got := nearNames("batch-worker", live)
	want := []string{"batch-workers", "batch-worke", "batch-wroker"}
	if !slices.Equal(got, want) {
		t.Errorf("nearNames = %v, want %v", got, want)
	}
	if got := nearNames("x", []string{"a", "b", "c", "d"}); len(got) != maxHinted {
		t.Errorf("nearNames of 4 one-letter names = %v, want %d", got, maxHinted)
	}
	// numbered siblings are names given on purpose: an edit of a digit is no typo
	for _, pair := range [][2]string{{"shard-1", "shard-2"}, {"db1", "db2"}, {"ha-job", "ha-job2"}, {"n10", "n1"}, {"r12", "r21"}} {
		if got := nearNames(pair[0], []string{pair[1]}); len(got) != 0 {
			t.Errorf("nearNames(%q, %q) = %v, want none: they differ in a digit", pair[0], pair[1], got)
		}
	}
	if got := nearNames("shard-a1", []string{"shard-b1"}); len(got) != 1 {
		t.Errorf("nearNames(shard-a1, shard-b1) = %v, want it: a letter differs", got)
	}
}
