package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// gated is a child that marks itself started and runs until its gate file
// appears, so a test decides when each holder releases.
func (e *env) gated(name string) string {
	return fmt.Sprintf("touch %s; while [ ! -e %s ]; do sleep 0.02; done",
		e.path(name+".held"), e.path(name+".go"))
}

func (e *env) open(name string) { os.WriteFile(e.path(name+".go"), nil, 0o644) }

func (e *env) held(name string) bool { return exists(e.path(name + ".held")) }

// Capacity is never exceeded with 6 concurrent jobs on --max 2: each child
// logs its start and end times; the largest overlap must be 2.
func TestCapacityNeverExceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const jobs, n = 6, 2
	var procs []*proc
	for i := range jobs {
		f := e.path("job" + strconv.Itoa(i))
		procs = append(procs, e.start("sema", "cap", "--max", strconv.Itoa(n), "--",
			"sh", "-c", fmt.Sprintf("date +%%s%%N > %s.start; sleep 0.3; date +%%s%%N > %s.end", f, f)))
	}
	type edge struct{ at, d int64 }
	var edges []edge
	for i, p := range procs {
		if r := p.wait(t); r.status != 0 {
			t.Fatalf("job %d: %v", i, r)
		}
		f := e.path("job" + strconv.Itoa(i))
		start, end := readNanos(t, f+".start"), readNanos(t, f+".end")
		edges = append(edges, edge{start, 1}, edge{end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.d - b.d)
	})
	cur, most := 0, 0
	for _, ed := range edges {
		cur += int(ed.d)
		most = max(most, cur)
	}
	if most != n {
		t.Fatalf("largest overlap %d, want exactly %d (never more; and the jobs did contend)", most, n)
	}
}

func readNanos(t *testing.T, path string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(strings.TrimSpace(readFile(t, path)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// D1 end to end: N=2, the younger holder releases first; the first waiter
// must start while the older holder still holds, the second must not.
func TestD1YoungerHolderReleasesFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := schema.Prefix("d1", 2)
	var procs []*proc
	for i, name := range []string{"a", "b", "c", "d"} {
		procs = append(procs, e.start("sema", "d1", "--max", "2", "--", "sh", "-c", e.gated(name)))
		waitFor(t, name+" enqueued", func() bool { return e.keys(pre) == i+1 })
	}
	waitFor(t, "a and b hold", func() bool { return e.held("a") && e.held("b") })
	e.open("b")
	waitFor(t, "c to start while a holds", func() bool { return e.held("c") })
	if procs[0].exited() || e.held("d") {
		t.Fatalf("a exited %v, d held %v: want a holding and d waiting", procs[0].exited(), e.held("d"))
	}
	e.open("a")
	waitFor(t, "d to start after a", func() bool { return e.held("d") })
	e.open("c")
	e.open("d")
	for i, p := range procs {
		if r := p.wait(t); r.status != 0 {
			t.Fatalf("job %d: %v", i, r)
		}
	}
}

// 30 short jobs through --max 3 all succeed, and no key is left.
func TestManyShortJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	var wg sync.WaitGroup
	results := make([]result, 30)
	for i := range results {
		p := e.start("sema", "many", "--max", "3", "--", "sh", "-c", "echo $CONCH_REV >> "+e.path("revs"))
		wg.Add(1)
		go func() { defer wg.Done(); <-p.done; results[i] = p.res }()
	}
	wg.Wait()
	for i, r := range results {
		if r.status != 0 {
			t.Fatalf("job %d: %v", i, r)
		}
	}
	revs := strings.Fields(readFile(t, e.path("revs")))
	seen := map[string]bool{}
	for _, r := range revs {
		seen[r] = true
	}
	if len(revs) != 30 || len(seen) != 30 {
		t.Fatalf("%d runs with %d distinct fencing tokens, want 30 and 30", len(revs), len(seen))
	}
	if n := e.keys(schema.NamePrefix("many")); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// A waiter killed with SIGKILL does not block the queue past its lease TTL.
func TestKilledWaiterFreesQueueAtTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	pre := schema.Prefix("kw", 1)
	holder := e.start("sema", "kw", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	victim := e.start("sema", "kw", "--max", "1", "--ttl", "2s", "--", "true")
	waitFor(t, "victim queued", func() bool { return e.keys(pre) == 2 })
	next := e.start("sema", "kw", "--max", "1", "--", "sh", "-c", e.gated("n"))
	waitFor(t, "next queued", func() bool { return e.keys(pre) == 3 })
	victim.cmd.Process.Signal(syscall.SIGKILL)
	victim.wait(t)
	killed := time.Now()
	e.open("h")
	holder.wait(t)
	waitFor(t, "next to hold", func() bool { return e.held("n") })
	if d := time.Since(killed); d > 2*time.Second+3*time.Second {
		t.Fatalf("next held %v after the waiter died, TTL 2s", d)
	}
	e.open("n")
	if r := next.wait(t); r.status != 0 {
		t.Fatal(r)
	}
}
