package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// startWith runs conch like start, with extra environment variables.
func (e *env) startWith(extra []string, args ...string) *proc {
	e.t.Helper()
	saved := e.vars
	e.vars = append(append([]string(nil), e.vars...), extra...)
	defer func() { e.vars = saved }()
	return e.start(args...)
}

// D11 end to end: --spread names the key after the node; a second job on a
// node that holds finds no slot although one is free (75 with --nonblock, or
// when --wait runs out), with the node named by --node or CONCH_NODE; another
// node takes the free slot; a waiting job of the node starts once its
// holder ends.
func TestSpreadOneSlotPerNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := schema.Prefix("sp", 2)
	a1 := e.start("sema", "sp", "--max", "2", "--spread", "--node", "node-a", "--", "sh", "-c", e.gated("a1"))
	waitFor(t, "a1 holds", func() bool { return e.held("a1") })
	if n := e.keys(pre + "node-a"); n != 1 {
		t.Fatalf("no key %snode-a", pre)
	}
	r := e.run("sema", "sp", "--max", "2", "--spread", "--node", "node-a", "--nonblock", "--", "true")
	if r.status != 75 || !strings.Contains(r.stderr, "node-a already holds or waits") {
		t.Fatalf("second --nonblock job on node-a: %v, want 75 naming the node", r)
	}
	r = e.startWith([]string{"CONCH_NODE=node-a"}, "sema", "sp", "--max", "2", "--spread", "--wait", "300ms", "--", "true").wait(t)
	if r.status != 75 || !strings.Contains(r.stderr, "within --wait") {
		t.Fatalf("second job on node-a (CONCH_NODE) with --wait 300ms: %v, want 75", r)
	}
	if n := e.keys(pre); n != 1 {
		t.Fatalf("%d keys after two refused jobs, want node-a's only", n)
	}
	b1 := e.start("sema", "sp", "--max", "2", "--spread", "--node", "node-b", "--", "sh", "-c", e.gated("b1"))
	waitFor(t, "b1 holds beside a1", func() bool { return e.held("b1") })
	// a job that waits for its node's key was answered by etcd and is in line (its node-wait
	// marker): a signal then ends a wait, not a connection
	term := e.start("sema", "sp", "--max", "2", "--spread", "--node", "node-a", "--", "true")
	waitFor(t, "the job waits for node-a's key", func() bool { return strings.Contains(term.stderr.String(), "this node already holds") })
	term.cmd.Process.Signal(syscall.SIGTERM)
	if r := term.wait(t); !strings.Contains(r.stderr, "SIGTERM while waiting: left the queue") {
		t.Errorf("SIGTERM to a job waiting for its node's key: %v\nwant it to say it left the queue", r)
	}
	a2 := e.start("sema", "sp", "--max", "2", "--spread", "--node", "node-a", "--", "sh", "-c", e.gated("a2"))
	waitFor(t, "a2 waits for node-a's key", func() bool { return strings.Contains(a2.stderr.String(), "this node already holds") })
	e.open("a1")
	waitFor(t, "a2 holds after a1", func() bool { return e.held("a2") })
	e.open("a2")
	e.open("b1")
	for i, p := range []*proc{a1, b1, a2} {
		if r := p.wait(t); r.status != 0 {
			t.Fatalf("job %d: %v", i, r)
		}
	}
}

// A node's crash (conch SIGKILLed while holding, --ttl 1s) frees its spread
// slot at lease expiry: the node's next job, waiting for the node's key,
// takes it (D11, 04_sema.md "Failure behavior").
func TestSpreadCrashFreesSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a1 := e.start("sema", "spc", "--max", "1", "--spread", "--node", "n1", "--ttl", "1s", "--", "sh", "-c", e.gated("a1"))
	waitFor(t, "a1 holds", func() bool { return e.held("a1") })
	a2 := e.start("sema", "spc", "--max", "1", "--spread", "--node", "n1", "--", "sh", "-c", e.gated("a2"))
	waitFor(t, "a2 waits for n1's key", func() bool { return strings.Contains(a2.stderr.String(), "this node already holds") })
	a1.cmd.Process.Signal(syscall.SIGKILL)
	a1.wait(t)
	killed := time.Now()
	waitFor(t, "a2 holds after a1's lease expired", func() bool { return e.held("a2") })
	t.Logf("n1's slot taken again %v after its holder was killed (--ttl 1s)", time.Since(killed).Round(time.Millisecond))
	e.open("a2")
	if r := a2.wait(t); r.status != 0 {
		t.Fatal(r)
	}
}
