package vm

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/internal/systemdtest"
)

// Scope mode (D7, D8) and its exits (D3), end to end: the real conch inside a node with a real
// systemd, against a real etcd.

//go:embed testdata/child.sh
var childScript string

// child writes the test child into the node's directory for t and returns the argv that runs
// it (after conch's "--"), with "ignore" when it must ignore SIGTERM.
func (n *node) child(ignoreTERM bool) []string {
	n.t.Helper()
	n.write(n.dir+"/child.sh", childScript)
	argv := []string{"/bin/sh", n.dir + "/child.sh", n.dir}
	if ignoreTERM {
		argv = append(argv, "ignore")
	}
	return argv
}

// running waits for the child to report itself and returns its PID, its grandchild's PID and
// its scope's name (from CONCH_REV, the fencing token).
func (n *node) running(name string) (pid, gc int, scope string) {
	n.t.Helper()
	pid = n.awaitPID(n.dir + "/pid")
	gc = n.awaitPID(n.dir + "/gc")
	rev, err := strconv.ParseInt(n.await(n.dir+"/rev"), 10, 64)
	if err != nil {
		n.t.Fatalf("CONCH_REV: %v", err)
	}
	return pid, gc, systemd.ScopeName(name, rev)
}

func args(name string, flags ...string) []string {
	return append([]string{"sema", name}, flags...)
}

func cmdline(a []string, child []string) []string {
	return append(append(a, "--"), child...)
}

func TestConchInSystemd(t *testing.T) {
	e := newEnv(t)
	t.Run("ScopeListedWithChildInside", func(t *testing.T) { testScopeListed(t, e) })
	t.Run("SlotLostStopsChildAndGrandchild", func(t *testing.T) { testSlotLost(t, e) })
	t.Run("ServiceStopStopsChildAndReleases", func(t *testing.T) { testServiceStop(t, e) })
	t.Run("SIGKILLInService", func(t *testing.T) { testSIGKILL(t, e, true) })
	t.Run("SIGKILLOutsideAnyUnit", func(t *testing.T) { testSIGKILL(t, e, false) })
	t.Run("ServiceLimitsAndSliceInherited", func(t *testing.T) { testLimits(t, e) })
	t.Run("EscapedNamesAndDistinctScopes", func(t *testing.T) { testNames(t, e) })
	t.Run("KillSignalSIGINTAndProperties", func(t *testing.T) { testKillSignal(t, e) })
	t.Run("RuntimeMaxSec", func(t *testing.T) { testRuntimeMax(t, e, "-p", "RuntimeMaxSec=2") })
	t.Run("RuntimeMaxFlag", func(t *testing.T) { testRuntimeMax(t, e, "--runtime-max", "2s") })
	t.Run("RuntimeMaxSecOverFlag", func(t *testing.T) { testRuntimeMax(t, e, "--runtime-max", "1h", "-p", "RuntimeMaxSec=2") })
	t.Run("UnknownPropertyRefused", func(t *testing.T) { testUnknownProperty(t, e) })
	t.Run("ScopeNeverRunsDirect", func(t *testing.T) { testNever(t, e) })
	t.Run("ScopeFailsAfterSlotHeld", func(t *testing.T) { testScopeFails(t, e) })
	t.Run("UserManagerScope", func(t *testing.T) { testUserManager(t, e) })
	t.Run("LatencyScopeVsDirect", func(t *testing.T) { testLatency(t, e) })
}

// The scope is listed with D8's properties while the child runs, and the child (and what it
// starts) is inside it from its first instruction; --who reports the scope as the unit (D6).
func testScopeListed(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "listed"
	// Type=notify: the service is still starting (no READY=1) while conch creates the
	// scope; a scope ordered After= the service would deadlock with it until its timeout.
	p := n.service("listed.service", []string{"Type=notify", "NotifyAccess=main"}, cmdline(args(name, "--max", "1", "--kill-after", "3s"), n.child(false))...)
	pid, gc, scope := n.running(name)

	if units := n.scopes(); len(units) != 1 || units[0] != scope {
		t.Errorf("systemctl list-units 'conch-sema-*' = %v, want [%s]", units, scope)
	}
	props := n.show(scope, "Id", "Description", "ActiveState", "TimeoutStopUSec", "SendSIGKILL", "KillMode",
		"CollectMode", "Slice", "BindsTo", "After", "ControlGroup")
	rev := n.read(n.dir + "/rev")
	for prop, want := range map[string]string{
		"Id": scope, "ActiveState": "active", "TimeoutStopUSec": "3s", "SendSIGKILL": "yes",
		"KillMode": "control-group", "CollectMode": "inactive-or-failed", "Slice": "system.slice",
		"ControlGroup": "/system.slice/" + scope,
	} {
		if props[prop] != want {
			t.Errorf("%s: %s=%q, want %q", scope, prop, props[prop], want)
		}
	}
	if d := props["Description"]; !strings.Contains(d, name) || !strings.Contains(d, rev) {
		t.Errorf("%s: Description=%q, want the semaphore %q and the revision %s", scope, d, name, rev)
	}
	if !strings.Contains(" "+props["BindsTo"]+" ", " listed.service ") {
		t.Errorf("%s: BindsTo=%q, want listed.service", scope, props["BindsTo"])
	}
	if strings.Contains(" "+props["After"]+" ", " listed.service ") {
		t.Errorf("%s: After=%q must not hold listed.service (deadlock with a starting service)", scope, props["After"])
	}
	// The child's first statement read its own cgroup; its grandchild and its parent (the
	// guardian) are in the scope too.
	want := "0::" + props["ControlGroup"]
	if got := n.read(n.dir + "/cgroup"); got != want {
		t.Errorf("the child's first statement saw cgroup %q, want %q", got, want)
	}
	guardian, _ := strconv.Atoi(strings.TrimSpace(n.sh(fmt.Sprintf("ps -o ppid= -p %d", pid))))
	for what, p := range map[string]int{"grandchild": gc, "guardian": guardian} {
		if got := unified(n.read(fmt.Sprintf("/proc/%d/cgroup", p))); got != want {
			t.Errorf("the %s (pid %d) is in cgroup %q, want %q", what, p, got, want)
		}
	}
	who, err := n.RunWith(n.ctx, n.runOpts(), conch, "sema", name, "--who", "--json")
	if err != nil {
		t.Fatalf("--who --json: %v", err)
	}
	if !strings.Contains(string(who.Stdout), `"scope": "`+strings.ReplaceAll(scope, `\`, `\\`)+`"`) ||
		!strings.Contains(string(who.Stdout), `"unit": "listed.service"`) {
		t.Errorf("--who --json does not name the service listed.service as the unit and the scope %s as the scope:\n%s", scope, who.Stdout)
	}

	// A command's very first instruction: cat reading its own cgroup, run by conch.
	res, err := n.RunWith(n.ctx, n.runOpts(), conch, "sema", "first", "--max", "1", "--", "cat", "/proc/self/cgroup")
	if err != nil {
		t.Fatalf("conch -- cat /proc/self/cgroup: %v", err)
	}
	if !regexp.MustCompile(`^0::/system\.slice/conch-sema-first-[0-9]+\.scope$`).MatchString(unified(string(res.Stdout))) {
		t.Errorf("cat /proc/self/cgroup under conch printed %q, want its own conch-sema-first-REV.scope", res.Stdout)
	}

	// The child exits 0; the grandchild it left is stopped (D7), conch exits 0, the slot is
	// released and the scope is gone.
	n.write(n.dir+"/stop", "")
	if code, stderr := exitCode(t, n.ctx, p); code != 0 {
		t.Errorf("conch exited %d, want the child's 0: %s", code, stderr)
	}
	n.allGone(time.Now(), stopMargin, pid, gc)
	if h := e.holders(t, name, 1); len(h) != 0 {
		t.Errorf("%d keys left after the child exited", len(h))
	}
	n.noScopeLeft()
}

// unified returns the "0::" line of a /proc/PID/cgroup file: the nodes run systemd on the unified
// hierarchy, and the kernel lists the host's v1 hierarchies too.
func unified(procCgroup string) string {
	for _, line := range strings.Split(procCgroup, "\n") {
		if strings.HasPrefix(line, "0::") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// shellQuote quotes s for /bin/sh (unit names hold backslashes).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runOpts are RunOptions with conch's environment.
func (n *node) runOpts() systemdtest.RunOptions {
	return systemdtest.RunOptions{Env: n.env()}
}

// The slot is lost (an operator deletes the key) while the child, which ignores SIGTERM, and
// its double-forked grandchild run: both are SIGKILLed by systemd after --kill-after, conch
// exits 70 (D3, D7) and no scope remains.
func testSlotLost(t *testing.T, e *env) {
	n := e.boot(t)
	const name, killAfter = "lost", 2 * time.Second
	p := n.service("lost.service", nil, cmdline(args(name, "--max", "1", "--kill-after", killAfter.String()), n.child(true))...)
	pid, gc, scope := n.running(name)
	if units := n.scopes(); len(units) != 1 || units[0] != scope {
		t.Fatalf("scopes %v, want [%s]", units, scope)
	}
	began := time.Now()
	e.deleteKeys(t, name, 1)
	took := n.allGone(began, killAfter+stopMargin, pid, gc)
	t.Logf("child and grandchild ignoring SIGTERM gone %v after the key was deleted (--kill-after %v)", took.Round(time.Millisecond), killAfter)
	if took < killAfter-200*time.Millisecond {
		t.Errorf("gone after %v: they ignore SIGTERM, so only SIGKILL after --kill-after %v should end them", took, killAfter)
	}
	if code, stderr := exitCode(t, n.ctx, p); code != 70 || !strings.Contains(stderr, name+"[") {
		t.Errorf("conch exited %d, want 70 with a line naming %s: %s", code, name, stderr)
	}
	n.noScopeLeft()
}

// `systemctl stop` of a service whose ExecStart is conch stops the child and its grandchild
// (the scope is bound to the service, D8), the slot is released at once, not at lease expiry,
// and the service stops cleanly.
func testServiceStop(t *testing.T, e *env) {
	n := e.boot(t)
	const name, ttl = "stopme", 30 * time.Second
	p := n.service("stopme.service", nil, cmdline(args(name, "--max", "1", "--ttl", ttl.String()), n.child(false))...)
	pid, gc, _ := n.running(name)
	began := time.Now()
	if _, err := n.Systemctl(n.ctx, "stop", "stopme.service"); err != nil {
		t.Fatal(err)
	}
	n.allGone(began, stopMargin, pid, gc)
	// conch died of its stop signal after releasing (D3): systemd saw a clean stop, and
	// systemd-run reports the service's result "success" as 0.
	if code, stderr := exitCode(t, n.ctx, p); code != 0 {
		t.Errorf("the stopped service's result is not success (systemd-run exit %d): %s", code, stderr)
	}
	n.waitFor("the slot to be released", func() bool { return len(e.holders(t, name, 1)) == 0 })
	if took := time.Since(began); took > stopMargin {
		t.Errorf("slot released %v after systemctl stop, want at once (the lease TTL is %v)", took, ttl)
	}
	n.noScopeLeft()
}

// conch is SIGKILLed, in a service or started outside any unit (as from a login shell): the
// guardian, the child's parent inside the scope, stops its own scope (D7), so the child and
// grandchild, which ignore SIGTERM, end within --kill-after (+ margin); the slot frees only at
// lease expiry.
func testSIGKILL(t *testing.T, e *env, inService bool) {
	n := e.boot(t)
	const killAfter, ttl = time.Second, 5 * time.Second
	name := "killed-shell"
	if inService {
		name = "killed-service"
	}
	a := cmdline(args(name, "--max", "1", "--ttl", ttl.String(), "--kill-after", killAfter.String()), n.child(true))
	if inService {
		n.service("killed.service", nil, a...)
	} else {
		n.loginShell(a...)
	}
	pid, gc, scope := n.running(name)
	if units := n.scopes(); len(units) != 1 || units[0] != scope {
		t.Fatalf("scopes %v, want [%s]", units, scope)
	}
	h := e.holders(t, name, 1)
	if len(h) != 1 {
		t.Fatalf("%d keys, want 1", len(h))
	}
	began := time.Now()
	if inService {
		if _, err := n.Systemctl(n.ctx, "kill", "--kill-who=main", "--signal=SIGKILL", "killed.service"); err != nil {
			t.Fatal(err)
		}
	} else {
		n.sh(fmt.Sprintf("kill -KILL %d", h[0].rec.PID))
	}
	if left := e.holders(t, name, 1); len(left) != 1 {
		t.Errorf("%d keys right after SIGKILL, want the dead holder's until its lease expires", len(left))
	}
	took := n.allGone(began, killAfter+stopMargin, pid, gc)
	t.Logf("child and grandchild gone %v after conch's SIGKILL (--kill-after %v)", took.Round(time.Millisecond), killAfter)
	if !inService {
		// No service to bind the scope to: only the guardian can have asked systemd to stop
		// it (D7), which systemd logs as a stop job.
		if j := n.sh("journalctl -q --no-pager -u " + shellQuote(scope)); !strings.Contains(j, "Stopping "+scope) {
			t.Errorf("no stop job of %s in the journal: the guardian did not stop its own scope:\n%s", scope, j)
		}
	}
	n.waitFor("the lease to expire", func() bool { return len(e.holders(t, name, 1)) == 0 })
	if took := time.Since(began); took > ttl+stopMargin {
		t.Errorf("slot freed %v after SIGKILL, want at lease expiry (TTL %v)", took, ttl)
	}
	n.noScopeLeft()
}

// A service with MemoryMax=300M and TasksMax=50 in a slice of its own runs conch: the child's
// scope has the same limits and sits in the service's slice (D8).
func testLimits(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "limited"
	p := n.service("limited.service", []string{"MemoryMax=300M", "TasksMax=50", "Slice=conchtest.slice"},
		cmdline(args(name, "--max", "1"), n.child(false))...)
	_, _, scope := n.running(name)
	props := n.show(scope, "MemoryMax", "TasksMax", "Slice", "ControlGroup", "BindsTo")
	for prop, want := range map[string]string{
		"MemoryMax": strconv.Itoa(300 << 20), "TasksMax": "50", "Slice": "conchtest.slice",
		"ControlGroup": "/conchtest.slice/" + scope, "BindsTo": "limited.service",
	} {
		if props[prop] != want {
			t.Errorf("%s: %s=%q, want %q", scope, prop, props[prop], want)
		}
	}
	n.write(n.dir+"/stop", "")
	if code, stderr := exitCode(t, n.ctx, p); code != 0 {
		t.Errorf("conch exited %d: %s", code, stderr)
	}
	n.noScopeLeft()
}

// Names that need escaping (dots, dashes, 128 characters) give valid units, and two concurrent
// holders of one semaphore get distinct scopes.
func testNames(t *testing.T, e *env) {
	n := e.boot(t)
	long := "L" + strings.Repeat("-.", 63) + "x" // 128 characters, 63 dashes to escape
	cases := []struct {
		name string
		max  int
	}{{"a.b-c_d", 2}, {"a.b-c_d", 2}, {long, 1}}
	var stops []string
	var want []string
	for i, c := range cases {
		dir := fmt.Sprintf("%s/h%d", n.dir, i)
		n.sh("mkdir -p " + dir)
		n.write(dir+"/child.sh", childScript)
		n.service(fmt.Sprintf("names-%d.service", i), nil,
			cmdline(args(c.name, "--max", strconv.Itoa(c.max)), []string{"/bin/sh", dir + "/child.sh", dir})...)
		rev, err := strconv.ParseInt(n.await(dir+"/rev"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		scope := systemd.ScopeName(c.name, rev)
		want = append(want, scope)
		stops = append(stops, dir+"/stop")
		props := n.show(scope, "Id", "LoadState", "ActiveState", "ControlGroup")
		if props["Id"] != scope || props["LoadState"] != "loaded" || props["ActiveState"] != "active" {
			t.Errorf("%q: scope %s: %v", c.name, scope, props)
		}
		if got := n.read(dir + "/cgroup"); got != "0::"+props["ControlGroup"] {
			t.Errorf("%q: child in cgroup %q, want %q", c.name, got, props["ControlGroup"])
		}
		if len(scope) > 255 {
			t.Errorf("%q: scope name of %d characters", c.name, len(scope))
		}
	}
	got := n.scopes()
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") || want[0] == want[1] || want[1] == want[2] {
		t.Errorf("scopes %v, want three distinct ones %v", got, want)
	}
	for _, s := range stops {
		n.write(s, "")
	}
	n.noScopeLeft()
}

// -p KillSignal=SIGINT: stopping the scope delivers SIGINT; the -p properties are on the scope.
func testKillSignal(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "intr"
	p := n.service("intr.service", nil, cmdline(args(name, "--max", "1", "-p", "KillSignal=SIGINT",
		"-p", "CPUQuota=50%", "-p", "MemoryMax=200M", "-p", "TimeoutStopSec=3s"), n.child(false))...)
	pid, gc, scope := n.running(name)
	props := n.show(scope, "KillSignal", "CPUQuotaPerSecUSec", "MemoryMax", "TimeoutStopUSec")
	for prop, want := range map[string]string{
		"KillSignal": "2", "CPUQuotaPerSecUSec": "500ms", "MemoryMax": strconv.Itoa(200 << 20), "TimeoutStopUSec": "3s",
	} {
		if props[prop] != want {
			t.Errorf("%s: %s=%q, want %q", scope, prop, props[prop], want)
		}
	}
	began := time.Now()
	e.deleteKeys(t, name, 1)
	n.allGone(began, stopMargin, pid, gc)
	if code, stderr := exitCode(t, n.ctx, p); code != 70 {
		t.Errorf("conch exited %d, want 70: %s", code, stderr)
	}
	if got := n.read(n.dir + "/signal"); got != "INT" {
		t.Errorf("the child recorded %q, want INT (KillSignal=SIGINT)", got)
	}
	n.noScopeLeft()
}

// -p RuntimeMaxSec=2 (or --runtime-max 2s, or both with a longer --runtime-max) stops a long
// child after about 2 s: RuntimeMaxSec on the scope, exit 124 (D3), slot released, and the
// line names the limit that fired.
func testRuntimeMax(t *testing.T, e *env, flag ...string) {
	n := e.boot(t)
	name := "rt" + strings.TrimLeft(flag[0], "-")
	if len(flag) > 2 {
		name += "-both"
	}
	a := append(args(name, "--max", "1"), flag...)
	began := time.Now()
	p := n.service("runtime.service", nil, cmdline(a, n.child(false))...)
	pid, gc, scope := n.running(name)
	if got := n.show(scope, "RuntimeMaxUSec")["RuntimeMaxUSec"]; got != "2s" {
		t.Errorf("%s: RuntimeMaxUSec=%q, want 2s", scope, got)
	}
	code, stderr := exitCode(t, n.ctx, p)
	took := time.Since(began)
	limit := "--runtime-max 2s" // the line names the limit that fired, as it was given
	if slices.Contains(flag, "-p") {
		limit = "-p RuntimeMaxSec=2s"
	}
	if code != 124 || !strings.Contains(stderr, "ran past "+limit) {
		t.Errorf("conch exited %d, want 124 with a line naming %s: %s", code, limit, stderr)
	}
	if took < 2*time.Second || took > 2*time.Second+stopMargin {
		t.Errorf("conch ended %v after its start, want about 2 s", took)
	}
	t.Logf("%v: conch ended %v after its start", flag, took.Round(time.Millisecond))
	n.allGone(began, 2*time.Second+stopMargin, pid, gc)
	if h := e.holders(t, name, 1); len(h) != 0 {
		t.Errorf("%d keys left", len(h))
	}
	n.noScopeLeft()
}

// An unknown or scope-illegal property is refused with 64 before any etcd call (D8).
func testUnknownProperty(t *testing.T, e *env) {
	n := e.boot(t)
	rev := e.etcd.Revision()
	for _, prop := range []string{"Bogus=1", "Restart=always", "KillMode=none"} {
		res, err := n.RunWith(n.ctx, n.runOpts(), conch, "sema", "unknown", "--max", "1", "-p", prop, "--", "true")
		if err == nil || res.ExitCode != 64 || !strings.Contains(string(res.Stderr), strings.Split(prop, "=")[0]) {
			t.Errorf("-p %s: exit %d (%v), want 64 naming the property: %s", prop, res.ExitCode, err, res.Stderr)
		}
	}
	if got := e.etcd.Revision(); got != rev {
		t.Errorf("refused properties wrote to etcd: revision %d -> %d", rev, got)
	}
}

// --scope=never runs the child in direct mode even under systemd: it stays in conch's service.
func testNever(t *testing.T, e *env) {
	n := e.boot(t)
	res, err := n.RunWith(n.ctx, systemdtest.RunOptions{Unit: "never.service", Env: n.env()},
		conch, "sema", "never", "--max", "1", "--scope=never", "--", "cat", "/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if got := unified(string(res.Stdout)); got != "0::/system.slice/never.service" {
		t.Errorf("with --scope=never the child is in %q, want conch's own service", got)
	}
}

// The slot is held but the scope cannot be created (a unit of its name exists): with
// --scope=always the slot is released and conch exits 69 without running the child; with
// --scope=auto conch warns and runs the child in direct mode (D3).
func testScopeFails(t *testing.T, e *env) {
	n := e.boot(t)
	const name = "scopefail"
	for _, mode := range []string{"always", "auto"} {
		// The next holder's revision is the next etcd revision: take the names of the next few.
		rev := e.etcd.Revision()
		for r := rev + 1; r <= rev+3; r++ {
			n.sh(fmt.Sprintf("setsid systemd-run --scope --quiet --unit=%s sleep 1000 </dev/null >/dev/null 2>&1 &", systemd.ScopeName(name, r)))
			n.waitFor("the squatting scope", func() bool {
				return n.show(systemd.ScopeName(name, r), "ActiveState")["ActiveState"] == "active"
			})
		}
		ran := n.dir + "/ran-" + mode
		res, err := n.RunWith(n.ctx, systemdtest.RunOptions{Unit: "fail-" + mode + ".service", Env: n.env()},
			conch, "sema", name, "--max", "1", "--scope="+mode, "--", "/bin/sh", "-c", "cat /proc/self/cgroup > "+ran)
		stderr := strings.TrimSpace(string(res.Stderr))
		switch mode {
		case "always":
			if err == nil || res.ExitCode != 69 || strings.Count(stderr, "\n") != 0 || !strings.Contains(stderr, name+"[") {
				t.Errorf("--scope=always: exit %d (%v), want 69 with one line naming %s: %q", res.ExitCode, err, name, stderr)
			}
			if got := n.read(ran); got != "" {
				t.Errorf("--scope=always: the child ran although its scope could not be made (%s)", got)
			}
		case "auto":
			if err != nil || !strings.Contains(stderr, "WARNING") || !strings.Contains(stderr, "scope") {
				t.Errorf("--scope=auto: exit %d (%v), want 0 and a warning: %q", res.ExitCode, err, stderr)
			}
			if got := unified(n.read(ran)); got != "0::/system.slice/fail-auto.service" {
				t.Errorf("--scope=auto: the child ran in %q, want conch's own service (direct mode)", got)
			}
		}
		if h := e.holders(t, name, 1); len(h) != 0 {
			t.Errorf("--scope=%s: %d keys left, want the slot released", mode, len(h))
		}
		// conch must not have stopped the unit that took its scope's name: it is not conch's.
		if units := n.scopes(); len(units) != 3 {
			t.Errorf("--scope=%s: scopes %v, want the 3 squatting ones untouched", mode, units)
		}
		n.sh("systemctl stop 'conch-sema-scopefail-*.scope'")
		n.noScopeLeft()
	}
	n.noScopeLeft()
}

// As a non-root user, conch talks to the user's own manager (D8, like systemd-run --user): the
// scope is a user unit, and when conch is SIGKILLed the guardian stops it there (D7).
func testUserManager(t *testing.T, e *env) {
	n := e.boot(t)
	const name, uid, killAfter = "asuser", "1000", time.Second
	if _, err := n.Systemctl(n.ctx, "start", "user@"+uid+".service"); err != nil {
		t.Fatal(err)
	}
	n.sh("chown " + uid + " " + n.dir)
	a := cmdline(args(name, "--max", "1", "--kill-after", killAfter.String()), n.child(true))
	if _, err := n.StartWith(n.ctx, systemdtest.RunOptions{Unit: "asuser.service", Properties: []string{"User=" + uid},
		Env: append(n.env(), "XDG_RUNTIME_DIR=/run/user/"+uid)}, append([]string{conch}, a...)...); err != nil {
		t.Fatalf("starting conch as uid %s: %v", uid, err)
	}
	pid, gc, scope := n.running(name)
	cg := n.read(n.dir + "/cgroup")
	if !strings.HasPrefix(cg, "0::/user.slice/user-"+uid+".slice/user@"+uid+".service/") || !strings.HasSuffix(cg, "/"+scope) {
		t.Errorf("the child is in %q, want %s below user@%s.service", cg, scope, uid)
	}
	h := e.holders(t, name, 1)
	if len(h) != 1 {
		t.Fatalf("%d keys, want 1", len(h))
	}
	began := time.Now()
	n.sh(fmt.Sprintf("kill -KILL %d", h[0].rec.PID))
	took := n.allGone(began, killAfter+stopMargin, pid, gc)
	t.Logf("user scope: child and grandchild gone %v after conch's SIGKILL", took.Round(time.Millisecond))
}

// latencyRuns is how many times each mode runs `conch sema x --max 1 -- true`.
const latencyRuns = 21

// The added latency of scope mode over direct mode for `conch sema x --max 1 -- true`, both
// run alternately by one service in one node against the same etcd (median of latencyRuns
// each). It is logged, not asserted: it measures, on a shared machine.
func testLatency(t *testing.T, e *env) {
	n := e.boot(t)
	script := fmt.Sprintf(`for i in $(seq %d); do for m in never always; do
	s=$(date +%%s%%N); %s sema x --max 1 --scope=$m -- true || exit 1; f=$(date +%%s%%N); echo "$m $((f-s))"
done; done`, latencyRuns, conch)
	res, err := n.RunWith(n.ctx, systemdtest.RunOptions{Unit: "latency.service", Env: n.env()}, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("latency loop: %v", err)
	}
	times := map[string][]time.Duration{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		var mode string
		var ns int64
		if _, err := fmt.Sscan(line, &mode, &ns); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		times[mode] = append(times[mode], time.Duration(ns))
	}
	direct, scope := median(times["never"]), median(times["always"])
	if len(times["never"]) != latencyRuns || len(times["always"]) != latencyRuns {
		t.Fatalf("got %d direct and %d scope runs, want %d each", len(times["never"]), len(times["always"]), latencyRuns)
	}
	t.Logf("conch sema x --max 1 -- true, median of %d runs each: direct mode %v, scope mode %v: scope mode adds %v",
		latencyRuns, direct.Round(10*time.Microsecond), scope.Round(10*time.Microsecond), (scope - direct).Round(10*time.Microsecond))
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
