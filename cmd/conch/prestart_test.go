package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// childPIDs returns the PIDs of pid's children, from the kernel's children lists.
func childPIDs(pid int) []int {
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// D7 and the 20 MiB budget of a waiting conch: only the waiter next in line keeps a guardian
// started ahead of its slot; one further back has none. When the slot passes on, the new head
// starts one, and every command runs.
func TestGuardianOnlyNextInLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := schema.Prefix("nl", 1)
	holder := e.start("sema", "nl", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	next := e.start("sema", "nl", "--max", "1", "--", "sh", "-c", e.gated("n"))
	waitFor(t, "next in line queued", func() bool { return e.keys(pre) == 2 })
	back := e.start("sema", "nl", "--max", "1", "--", "touch", e.path("back-ran"))
	waitFor(t, "second waiter queued", func() bool { return e.keys(pre) == 3 })

	waitFor(t, "a guardian for the waiter next in line", func() bool { return len(childPIDs(next.cmd.Process.Pid)) == 1 })
	waitFor(t, "no guardian for the waiter behind it", func() bool { return len(childPIDs(back.cmd.Process.Pid)) == 0 })

	e.open("h")
	if r := holder.wait(t); r.status != 0 {
		t.Fatalf("holder: %v", r)
	}
	waitFor(t, "the next waiter's command", func() bool { return e.held("n") })
	waitFor(t, "a guardian for the new head", func() bool { return len(childPIDs(back.cmd.Process.Pid)) == 1 })
	e.open("n")
	if r := next.wait(t); r.status != 0 {
		t.Fatalf("next: %v", r)
	}
	if r := back.wait(t); r.status != 0 || !exists(e.path("back-ran")) {
		t.Fatalf("last waiter: %v", r)
	}
}

// D7: SIGKILL of a waiting conch that keeps a guardian ahead of its slot: the guardian, which
// has no command yet, exits at once.
func TestSIGKILLToWaiterEndsItsGuardian(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "kw", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	w := e.start("sema", "kw", "--max", "1", "--", "touch", e.path("ran"))
	var guardian int
	waitFor(t, "the waiter's guardian", func() bool {
		kids := childPIDs(w.cmd.Process.Pid)
		if len(kids) == 1 {
			guardian = kids[0]
		}
		return guardian != 0
	})
	w.cmd.Process.Signal(syscall.SIGKILL)
	w.wait(t)
	waitFor(t, "the guardian to exit", func() bool { return !pidAlive(guardian) })
	e.open("h")
	holder.wait(t)
	if exists(e.path("ran")) {
		t.Fatal("the killed waiter's command ran")
	}
}

// D3, D7: the guardian SIGKILLed while the child runs: conch stops the child's tree itself,
// releases, and exits 70 (the child ran, its status is unknown), not 69 ("never started").
func TestGuardianKilledWhileChildRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "gk", "--max", "1", "--scope=never", "--", "sh", "-c", "echo $$ > "+e.path("child")+"; "+e.gated("h"))
	waitFor(t, "the child", func() bool { return e.held("h") })
	child := readPID(t, e.path("child"))
	kids := childPIDs(p.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("conch has children %v, want its guardian only", kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.status != exitSlotLost || !strings.Contains(r.stderr, "guardian") {
		t.Fatalf("conch exited %d with %q; want %d and a line naming the guardian", r.status, r.stderr, exitSlotLost)
	}
	if pidAlive(child) {
		t.Errorf("the child %d outlived its guardian and conch (D7)", child)
	}
	if w := e.run("sema", "gk", "--max", "1", "--who"); w.status != 1 {
		t.Errorf("--who after the run: %d %q, want 1 (empty: the slot was released)", w.status, w.stdout)
	}
}

// The guardian started and preloaded while a waiter is next in line is the one that
// runs its child: the spec Run gets matches the preloaded one (a mismatch would start a fresh
// guardian), and the child sees the fencing token of the key it waited with.
func TestPreloadedGuardianRunsTheChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "pl", "--max", "1", "--scope=never", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	w := e.start("sema", "pl", "--max", "1", "--scope=never", "--", "sh", "-c", `echo "$PPID $CONCH_REV" > "$0"`, e.path("out"))
	guardian, key := e.nextInLine(t, w, "pl")
	rev := key.CreateRevision
	e.open("h")
	holder.wait(t)
	if r := w.wait(t); r.status != 0 {
		t.Fatalf("waiter: %v", r)
	}
	b, err := os.ReadFile(e.path("out"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), fmt.Sprintf("%d %d", guardian, rev); got != want {
		t.Errorf("child's parent and CONCH_REV: %q, want %q (the guardian prestarted while waiting, the waiter's key)", got, want)
	}
}

// D7 with a preloaded spec (hostile test): the promoted waiter's guardian is SIGSTOPped, so
// "go" waits in its pipe; the slot is then lost (lease revoked). The command must not start
// on that key: conch withdraws the go (stop, then SIGCONT), queues again, and the child runs
// once, with the new key's fencing token.
func TestWithdrawnGoToStoppedGuardian(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "wg", "--max", "1", "--scope=never", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	w := e.start("sema", "wg", "--max", "1", "--scope=never", "-v", "--", "sh", "-c", `echo "$CONCH_REV" >> "$0"`, e.path("ran"))
	guardian, first := e.nextInLine(t, w, "wg")
	if err := syscall.Kill(guardian, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.open("h")
	holder.wait(t)
	waitFor(t, "the waiter to hold", func() bool { return strings.Contains(w.stderr.String(), fmt.Sprintf("rev=%d", first.CreateRevision)) })
	if _, err := e.c.Revoke(t.Context(), clientv3.LeaseID(first.Lease)); err != nil {
		t.Fatal(err)
	}
	if r := w.wait(t); r.status != 0 {
		t.Fatalf("waiter: %v", r)
	}
	b, _ := os.ReadFile(e.path("ran"))
	if got := strings.Fields(string(b)); len(got) != 1 || got[0] == fmt.Sprint(first.CreateRevision) {
		t.Fatalf("the child ran with CONCH_REV %q; want once, with a new key's (not the revoked %d)\nstderr: %s", got, first.CreateRevision, w.stderr.String())
	}
}

// nextInLine waits until waiter w, queued on name --max 1 behind one holder, is next in line
// with its prestarted guardian (its one child), and returns the guardian's PID and w's key.
func (e *env) nextInLine(t *testing.T, w *proc, name string) (int, *mvccpb.KeyValue) {
	t.Helper()
	var guardian int
	waitFor(t, "the waiter next in line, with its key and guardian", func() bool {
		if kids := childPIDs(w.cmd.Process.Pid); len(kids) == 1 {
			guardian = kids[0]
		}
		return guardian != 0 && e.keys(schema.Prefix(name, 1)) == 2 && strings.Contains(w.stderr.String(), "next in line")
	})
	resp, err := e.c.Get(t.Context(), schema.Prefix(name, 1), clientv3.WithLastCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the waiter's key: %v %v", resp, err)
	}
	return guardian, resp.Kvs[0]
}
