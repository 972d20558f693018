package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/syncbuf"
	"github.com/conch-project/conch/sema/schema"

	"golang.org/x/sys/unix"
)

// D3/D7: SIGTERM to a holder stops the child, removes the key, and conch
// dies of SIGTERM itself.
func TestSIGTERMToHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "term", "--max", "1", "--", "sh", "-c", "echo $$ > "+e.path("pid")+"; exec sleep 60")
	pid := readPID(t, e.path("pid"))
	p.cmd.Process.Signal(syscall.SIGTERM)
	r := p.wait(t)
	if r.signal != syscall.SIGTERM || !strings.Contains(r.stderr, "SIGTERM") && !strings.Contains(r.stderr, "terminated") {
		t.Fatalf("conch after SIGTERM: %v, want death by SIGTERM with a reason", r)
	}
	if pidAlive(pid) {
		t.Fatalf("child %d outlived conch", pid)
	}
	if n := e.keys(schema.NamePrefix("term")); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// D3: SIGQUIT from outside a terminal is a stop request like SIGTERM: conch stops the child,
// releases at once (not at the lease's expiry, --ttl 60), and dies of SIGQUIT, without Go's
// goroutine dump and exit 2.
func TestSIGQUITToHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "quit", "--max", "1", "--ttl", "60", "--", "sh", "-c", "echo $$ > "+e.path("pid")+"; exec sleep 60")
	pid := readPID(t, e.path("pid"))
	p.cmd.Process.Signal(syscall.SIGQUIT)
	r := p.wait(t)
	if r.signal != syscall.SIGQUIT || !strings.Contains(r.stderr, "SIGQUIT: stopped the child and released the slot") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("conch after SIGQUIT: %v, want death by SIGQUIT with its line and no dump", r)
	}
	if pidAlive(pid) {
		t.Fatalf("child %d outlived conch", pid)
	}
	if n := e.keys(schema.NamePrefix("quit")); n != 0 {
		t.Fatalf("%d keys left after SIGQUIT: the slot must be released, not left to expire", n)
	}
}

// SIGINT, SIGHUP and SIGQUIT to a waiting conch remove its key and re-raise.
func TestSignalToWaiter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := schema.Prefix("sw", 1)
	holder := e.start("sema", "sw", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		w := e.start("sema", "sw", "--max", "1", "--", "touch", e.path("ran"))
		waitFor(t, "waiter queued", func() bool { return e.keys(pre) == 2 })
		w.cmd.Process.Signal(sig)
		if r := w.wait(t); r.signal != sig {
			t.Fatalf("waiter after %v: %v", sig, r)
		}
		if n := e.keys(pre); n != 1 {
			t.Fatalf("after %v to the waiter: %d keys, want 1", sig, n)
		}
	}
	if exists(e.path("ran")) {
		t.Fatal("a signalled waiter ran its command")
	}
	e.open("h")
	holder.wait(t)
}

// D7: SIGKILL to conch ends its child and a grandchild that left the process
// group with setsid, within --kill-after plus a margin.
func TestSIGKILLToConchEndsTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := fmt.Sprintf(`echo $$ > %s; setsid sh -c 'echo $$ > %s; trap "" TERM; while :; do sleep 0.1; done' & trap "" TERM; while :; do sleep 0.1; done`,
		e.path("child"), e.path("grandchild"))
	p := e.start("sema", "sk", "--max", "1", "--ttl", "2s", "--kill-after", "1s", "--", "sh", "-c", script)
	child, grand := readPID(t, e.path("child")), readPID(t, e.path("grandchild"))
	if sid, _ := unix.Getsid(grand); sid != grand {
		t.Fatalf("grandchild did not leave the session (sid %d)", sid)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	killed := time.Now()
	waitFor(t, "child and grandchild to end", func() bool { return !pidAlive(child) && !pidAlive(grand) })
	if d := time.Since(killed); d > 1*time.Second+3*time.Second {
		t.Fatalf("tree ended %v after SIGKILL, want within --kill-after 1s + 3s", d)
	}
	waitFor(t, "slot to free at lease expiry", func() bool { return e.keys(schema.NamePrefix("sk")) == 0 })
}

// A signal conch's caller ignores (nohup: SIGHUP) stays ignored: the child runs on and conch
// exits with its status, as any program started under nohup would (found by the hostile test).
func TestIgnoredSignalStaysIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command("sh", "-c", `trap '' HUP; exec "$0" "$@"`, conchBin, "sema", "nohup", "--max", "1", "--", "sh", "-c", e.gated("h"))
	cmd.Env = e.vars
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "holder", func() bool { return e.held("h") })
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // negative check: a conch that caught SIGHUP stops the child in ms
	e.open("h")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("conch with SIGHUP ignored, after SIGHUP: %v (want exit 0: the child finished)\n%s", err, stderr.String())
		}
	case <-time.After(testTimeout):
		t.Fatal("conch did not finish")
	}
}

// D7d for a waiter: a waiting conch stopped past its lease (--ttl 2) finds its key gone with
// the lease's expiry: it says the lease expired, not that a key was deleted, re-enters the
// queue and runs its command once the holder ends.
func TestStoppedWaiterSaysLeaseExpired(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	pre := schema.Prefix("wexp", 1)
	holder := e.start("sema", "wexp", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	w := e.start("sema", "wexp", "--max", "1", "--ttl", "2", "--", "touch", e.path("ran"))
	waitFor(t, "waiter queued", func() bool { return e.keys(pre) == 2 })
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiter's lease to expire", func() bool { return e.keys(pre) == 1 })
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiter to re-enter", func() bool { return strings.Contains(w.stderr.String(), "re-entering") })
	e.open("h")
	holder.wait(t)
	r := w.wait(t)
	if r.status != 0 || !exists(e.path("ran")) || !strings.Contains(r.stderr, "lease expired") || strings.Contains(r.stderr, "key deleted") {
		t.Fatalf("waiter stopped past its lease: %v, want 0, its command run, and the lease's expiry said", r)
	}
}
