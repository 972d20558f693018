package vm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemd"
)

// The scope prepared ahead of the slot (D8b): the waiter next in line has its guardian wait in
// its scope before the slot is free, so that the hand-off only lets the child exec.

func TestPreparedScope(t *testing.T) {
	e := newEnv(t)
	t.Run("NextInLineWaitsInItsScope", func(t *testing.T) { testPreparedWaits(t, e) })
	t.Run("WaiterThatLeavesLeavesNoScope", func(t *testing.T) { testPreparedLeaves(t, e) })
	t.Run("PromotedChildStoppedWhenConchKilled", func(t *testing.T) { testPreparedKilled(t, e) })
}

// childIn writes the test child into dir of the node and returns its argv: its files (pid,
// gc, rev, cgroup) go to dir, and it runs until dir/stop exists.
func (n *node) childIn(dir string, ignoreTERM bool) []string {
	n.t.Helper()
	n.sh("mkdir -p " + dir)
	n.write(dir+"/child.sh", childScript)
	argv := []string{"/bin/sh", dir + "/child.sh", dir}
	if ignoreTERM {
		argv = append(argv, "ignore")
	}
	return argv
}

// queue starts holder A and waiter B of name[1] as services a.service and b.service, each with
// its own child directory, waits until B is queued behind A's running child, and returns the
// directories and the scope prepared for B's key.
func (n *node) queue(name string, flags ...string) (dirA, dirB, scopeB string) {
	n.t.Helper()
	dirA, dirB = n.dir+"/a", n.dir+"/b"
	n.service("a.service", nil, cmdline(args(name, append([]string{"--max", "1"}, flags...)...), n.childIn(dirA, false))...)
	n.awaitPID(dirA + "/pid")
	n.service("b.service", nil, cmdline(args(name, append([]string{"--max", "1"}, flags...)...), n.childIn(dirB, true))...)
	var hs []holder
	n.waitFor("B's key behind A's", func() bool {
		hs = n.e.holders(n.t, name, 1)
		return len(hs) == 2
	})
	return dirA, dirB, systemd.ScopeName(name, hs[1].rev)
}

// scopeProcs returns the PIDs in scope's cgroup (in system.slice) of the node.
func (n *node) scopeProcs(scope string) []string {
	return strings.Fields(n.read("/sys/fs/cgroup/system.slice/" + scope + "/cgroup.procs"))
}

// B, next in line, waits in a scope that says so and holds only its guardian; --who shows B
// waiting; when A's child exits, B's child's first instruction is in that scope, whose
// Description becomes the holder's.
func testPreparedWaits(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "prepared"
	dirA, dirB, scope := n.queue(name)
	n.waitFor(scope+" prepared for the waiter", func() bool { return slices.Contains(n.scopes(), scope) })
	props := n.show(scope, "Description", "ControlGroup")
	if d := props["Description"]; !strings.Contains(d, "waiting for the slot") || !strings.Contains(d, name) {
		t.Errorf("%s while B waits: Description=%q, want it to name %s and say it waits", scope, d, name)
	}
	procs := n.scopeProcs(scope)
	if len(procs) != 1 {
		t.Fatalf("%s while B waits holds %v, want only B's guardian", scope, procs)
	}
	b := e.holders(t, name, 1)[1].rec.PID
	if ppid := strings.TrimSpace(n.sh("ps -o ppid= -p " + procs[0])); ppid != fmt.Sprint(b) {
		t.Errorf("%s while B waits holds process %s, child of %s, want B's guardian, a child of B's conch (%d)", scope, procs[0], ppid, b)
	}
	if n.read(dirB+"/pid") != "" {
		t.Fatal("B's child ran while A held the slot")
	}
	who, err := n.RunWith(n.ctx, n.runOpts(), conch, "sema", name, "--who", "--json")
	if err != nil {
		t.Fatalf("--who: %v", err)
	}
	if held := strings.Count(string(who.Stdout), `"HELD"`); held != 1 {
		t.Errorf("--who --json shows %d holders while B waits, want 1:\n%s", held, who.Stdout)
	}

	n.write(dirA+"/stop", "")
	n.awaitPID(dirB + "/pid")
	if got, want := n.read(dirB+"/cgroup"), "0::"+props["ControlGroup"]; got != want {
		t.Errorf("B's child's first statement saw cgroup %q, want %q", got, want)
	}
	n.waitFor(scope+"'s holder Description", func() bool {
		return !strings.Contains(n.show(scope, "Description")["Description"], "waiting")
	})
	n.write(dirB+"/stop", "")
	n.noScopeLeft()
}

// A waiter next in line that leaves the queue leaves no scope behind: --wait running out
// (exit 75), its service stopped (SIGTERM), its conch SIGKILLed.
func testPreparedLeaves(t *testing.T, e *env) {
	n := e.boot(t)
	for i, leave := range []struct {
		how   string
		flags []string
		act   func()
	}{
		{"--wait ran out", []string{"--wait", "4s"}, func() {}},
		{"service stopped", nil, func() { _, _ = n.Systemctl(n.ctx, "stop", "b.service") }},
		{"conch SIGKILLed", nil, func() {
			_, _ = n.Systemctl(n.ctx, "kill", "--kill-who=main", "--signal=SIGKILL", "b.service")
		}},
	} {
		name := fmt.Sprintf("leaves%d", i)
		dirA, _, scope := n.queue(name, leave.flags...)
		n.waitFor(scope+" prepared for the waiter", func() bool { return slices.Contains(n.scopes(), scope) })
		leave.act()
		n.waitFor("B gone from the queue ("+leave.how+")", func() bool { return len(e.holders(t, name, 1)) == 1 })
		n.waitFor(scope+" gone ("+leave.how+")", func() bool { return !slices.Contains(n.scopes(), scope) })
		n.write(dirA+"/stop", "")
		n.noScopeLeft()
		n.sh("systemctl reset-failed a.service b.service 2>/dev/null; rm -rf " + n.dir + "/a " + n.dir + "/b")
	}
}

// A waiter promoted through its prepared scope is supervised as any holder: SIGKILL its conch,
// and its child (which ignores SIGTERM) and grandchild are gone within --kill-after plus the
// margin (D7).
func testPreparedKilled(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "prepkill"
	const killAfter = time.Second
	dirA, dirB, scope := n.queue(name, "--kill-after", killAfter.String())
	n.waitFor(scope+" prepared for the waiter", func() bool { return slices.Contains(n.scopes(), scope) })
	n.write(dirA+"/stop", "")
	pid, gc := n.awaitPID(dirB+"/pid"), n.awaitPID(dirB+"/gc")
	began := time.Now()
	if _, err := n.Systemctl(n.ctx, "kill", "--kill-who=main", "--signal=SIGKILL", "b.service"); err != nil {
		t.Fatal(err)
	}
	took := n.allGone(began, killAfter+stopMargin, pid, gc)
	t.Logf("promoted child and grandchild gone %v after conch's SIGKILL", took.Round(time.Millisecond))
	n.noScopeLeft()
}
