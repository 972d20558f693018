package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// D3, row "child's own status": the child's exit code, 128+n for signal n.
func TestExitChildStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "st", "--max", "1", "--", "sh", "-c", "exit 3"); r.status != 3 {
		t.Fatalf("exit 3: %v", r)
	}
	if r := e.run("sema", "st", "--max", "1", "--", "sh", "-c", "kill -USR1 $$"); r.status != 128+int(syscall.SIGUSR1) {
		t.Fatalf("child killed by SIGUSR1: %v", r)
	}
	if r := e.run("sema", "st", "--max", "1", "--", "true"); r.status != 0 || r.stderr != "" {
		t.Fatalf("true: %v (want silence on success without -v)", r)
	}
	if n := e.keys(schema.NamePrefix("st")); n != 0 {
		t.Fatalf("%d keys left after the jobs", n)
	}
}

// D3 rows 75 and -E: --nonblock and --wait with the slot taken; the child
// never starts and the key is gone.
func TestExitConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "cf", "--max", "1", "--", "sh", "-c", "touch "+e.path("held")+"; sleep 60")
	waitFor(t, "holder to start", func() bool { return exists(e.path("held")) })
	ran := e.path("ran")
	r := e.run("sema", "cf", "--max", "1", "--nonblock", "--", "touch", ran)
	if r.status != 75 || !strings.Contains(r.stderr, "cf[max=1]") {
		t.Fatalf("--nonblock: %v", r)
	}
	r = e.run("sema", "cf", "--max", "1", "-E", "3", "--wait", "300ms", "--", "touch", ran)
	if r.status != 3 {
		t.Fatalf("-E 3 --wait 300ms: %v", r)
	}
	r = e.run("sema", "cf", "--max", "1", "--wait", "0", "--", "touch", ran)
	if r.status != 75 {
		t.Fatalf("--wait 0: %v", r)
	}
	if exists(ran) {
		t.Fatal("the child ran without a slot")
	}
	if n := e.keys(schema.Prefix("cf", 1)); n != 1 {
		t.Fatalf("%d keys, want only the holder's (the waiters' keys must be gone)", n)
	}
	holder.cmd.Process.Signal(syscall.SIGTERM)
	holder.wait(t)
}

// A waiter whose --wait expires removes its key, and the next one queues fine.
func TestWaitExpiryRemovesKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "we", "--max", "1", "--", "sh", "-c", "touch "+e.path("held")+"; sleep 60")
	waitFor(t, "holder", func() bool { return exists(e.path("held")) })
	w := e.start("sema", "we", "--max", "1", "--wait", "2s", "--", "true")
	waitFor(t, "waiter to enqueue", func() bool { return e.keys(schema.Prefix("we", 1)) == 2 })
	if r := w.wait(t); r.status != 75 || !strings.Contains(r.stderr, "no slot within --wait") {
		t.Fatalf("waiter: %v", r)
	}
	if n := e.keys(schema.Prefix("we", 1)); n != 1 {
		t.Fatalf("%d keys after the waiter gave up, want 1", n)
	}
	holder.cmd.Process.Signal(syscall.SIGTERM)
	holder.wait(t)
}

// D3 row 64 and D4: bad usage is refused before any etcd call.
func TestExitUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rev := e.srv.Revision()
	long := strings.Repeat("x", 129)
	for _, args := range [][]string{
		{"sema", "bad/name", "--max", "1", "--", "true"},
		{"sema", "-x", "--max", "1", "--", "true"},
		{"sema", long, "--max", "1", "--", "true"},
		{"sema", "u", "--max", "0", "--", "true"},
		{"sema", "u", "--max", "+1", "--", "true"},
		{"sema", "u", "--max", "10001", "--", "true"},
		{"sema", "u", "--max", "1"},
		{"sema", "u", "--", "true"},
		{"sema", "u", "--max", "1", "true"},
		{"sema", "u", "--max", "1", "--ttl", "-3s", "--", "true"},
		{"sema", "u", "--max", "1", "--wait", "soon", "--", "true"},
		{"sema", "u", "--max", "1", "--nonblock", "--wait", "1s", "--", "true"},
		{"sema", "u", "--max", "1", "--bogus", "--", "true"},
		{"sema", "u", "--max", "1", "--json", "--", "true"},
		{"sema", "u", "--who", "--", "true"},
		{"sema", "u", "--who", "-p", "Bogus=1"},
		{"sema", "u", "--who", "--nonblock"},
		{"sema", "u", "--max", "1", "--spread", "--node", "0123456789abcdef", "--", "true"}, // reads as a lease ID (D11)
		{"sema", "u", "--max", "1", "--spread", "--node", "a/b", "--", "true"},
		{"sema", "u", "--max", "1", "--node", "-x", "--", "true"},
		{"sema", "u", "--who", "--spread"},
		{"sema", "u", "--max", "1", "--scope", "sometimes", "--", "true"},
		{"sema", "u", "--max", "1", "--cert", "/x.pem", "--", "true"},
		{"sema", "u", "--max", "1", "--config", "/nonexistent/conch.conf", "--", "true"},
		{"sema", "u", "--max", "1", "--kill-after", "0", "--", "true"},
		{"sema", "u", "--max", "1", "--endpoints", ",,", "--", "true"},
		{"sema"},
	} {
		r := e.run(args...)
		if r.status != 64 || r.stderr == "" {
			t.Errorf("conch %q: %v, want 64 with a reason", args, r)
		}
	}
	if got := e.srv.Revision(); got != rev {
		t.Fatalf("bad usage wrote to etcd: revision %d -> %d", rev, got)
	}
	if r := e.run("sema", "--help"); r.status != 0 || !strings.Contains(r.stdout, "Exit status") || !strings.Contains(r.stdout, "--kill-after") {
		t.Fatalf("--help: %v", r)
	}
	if r := e.run("--version"); r.status != 0 || !strings.HasPrefix(r.stdout, "conch ") {
		t.Fatalf("--version: %v", r)
	}
}

// D3 rows 126/127: reported before queueing.
func TestExitCannotExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "x", "--max", "1", "--", "no-such-command-here"); r.status != 127 || !strings.Contains(r.stderr, "no-such-command-here") {
		t.Fatalf("not found: %v", r)
	}
	if r := e.run("sema", "x", "--max", "1", "--", "/etc/hostname"); r.status != 126 {
		t.Fatalf("not executable: %v", r)
	}
}

// D3 row 69: etcd unreachable at start gives 69 within --dial-timeout,
// whatever --wait says.
func TestExitUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	e := newEnv(t)
	dead := etcdtest.UnusedEndpoint(t)
	for _, args := range [][]string{
		{"sema", "un", "--max", "1", "--endpoints", dead, "--dial-timeout", "1s", "--", "true"},
		{"sema", "un", "--max", "1", "--endpoints", dead, "--dial-timeout", "1s", "--wait", "1h", "--", "true"},
		{"sema", "un", "--who", "--endpoints", dead, "--dial-timeout", "1s"},
		// with a user, clientv3 logs in before the first request: still an outage
		{"sema", "un", "--max", "1", "--user", "bob:pw", "--endpoints", dead, "--dial-timeout", "1s", "--", "true"},
		{"sema", "un", "--who", "--user", "bob:pw", "--endpoints", dead, "--dial-timeout", "1s"},
	} {
		start := time.Now()
		r := e.run(args...)
		took := time.Since(start)
		if r.status != 69 || !strings.Contains(r.stderr, "conch: un") { // the line names the semaphore
			t.Errorf("%q: %v, want 69", args, r)
		}
		if took > 8*time.Second {
			t.Errorf("%q took %v with --dial-timeout 1s", args, took)
		}
	}
}

// D3 row 70 and D7: an operator deleting the holder's key stops the child.
func TestExitSlotLostOnOperatorDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "lost", "--max", "1", "--kill-after", "1s", "--", "sh", "-c", "echo $$ > "+e.path("pid")+"; exec sleep 60")
	pid := readPID(t, e.path("pid"))
	if _, err := e.c.Delete(t.Context(), schema.Prefix("lost", 1), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.status != 70 || !strings.Contains(r.stderr, "slot lost") {
		t.Fatalf("after del: %v", r)
	}
	// said as the stop begins (no -v), before the line that ends the run
	if i := strings.Index(r.stderr, "the slot is being lost (key deleted"); i < 0 || i > strings.LastIndex(r.stderr, "slot lost") {
		t.Errorf("after del: %v\nwant the stop announced with its cause before the last line", r)
	}
	if pidAlive(pid) {
		t.Fatalf("child %d still alive after conch exited 70", pid)
	}
}

// D3 row 124 (D7): --runtime-max stops an overlong child.
func TestExitRuntimeMax(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := time.Now()
	r := e.run("sema", "rt", "--max", "1", "--runtime-max", "1s", "--kill-after", "1s", "--", "sleep", "60")
	if r.status != 124 || !strings.Contains(r.stderr, "runtime-max") {
		t.Fatalf("runtime-max: %v", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
	if n := e.keys(schema.NamePrefix("rt")); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// D5: the child's environment.
func TestChildEnvironment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars = append(e.vars, "CONCH_REV=outer", "NOTIFY_SOCKET=/run/nothing", "WATCHDOG_USEC=1")
	out := e.path("env")
	r := e.run("sema", "envy", "--max", "3", "--", "sh", "-c", "env > "+out)
	if r.status != 0 {
		t.Fatal(r)
	}
	got := readFile(t, out)
	for _, want := range []string{"CONCH_SEMA=envy\n", "CONCH_MAX=3\n", "CONCH_LEASE="} {
		if !strings.Contains(got, want) {
			t.Errorf("child env lacks %q", want)
		}
	}
	if strings.Contains(got, "CONCH_REV=outer") || !strings.Contains(got, "CONCH_REV=") {
		t.Error("CONCH_REV not overridden")
	}
	if strings.Contains(got, "NOTIFY_SOCKET") || strings.Contains(got, "WATCHDOG_") {
		t.Error("child inherited conch's NOTIFY_SOCKET or WATCHDOG_*")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An unknown command is named as such, not reported as a flag problem, with the command
// it is a slip of when there is one.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"sem", "x", "--max", "2", "--", "true"}, "did you mean conch sema?"},
		{[]string{"semaphore", "x"}, "did you mean conch sema?"},
		{[]string{"fleet", "--listen", ":1"}, "did you mean conch fleetlock?"},
		{[]string{"foo"}, "conch's commands are sema and fleetlock"},
		{[]string{"version"}, "did you mean conch --version?"},
	} {
		r := e.run(c.args...)
		if r.status != 64 || !strings.Contains(r.stderr, "unknown command") || !strings.Contains(r.stderr, c.hint) {
			t.Errorf("conch %q: %v, want 64 naming the unknown command and %q", c.args, r, c.hint)
		}
	}
}

// Two operands where one <name> goes are each quoted as typed, with the fix.
func TestTwoNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "t", "true", "--max", "1")
	want := `expected one <name>, got 2: "t" "true"; put the command after --, as in: conch sema t --max N -- true`
	if r.status != 64 || !strings.Contains(r.stderr, want) {
		t.Errorf("%v, want 64 saying %q", r, want)
	}
}

// A TTL above etcd's maximum (9e9 s) is a usage error with a reason, not an
// outage (D3) and not a retry loop: conch's own bound on durations (100
// years, against overflow) refuses it first. etcd refusing a request
// for good is TestAuthRBAC's.
func TestRefusedByEtcdIs64(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "big", "--max", "1", "--ttl", "9000000001s", "--", "true")
	if r.status != 64 || !strings.Contains(r.stderr, "more than the 876000h0m0s allowed") {
		t.Fatalf("--ttl above etcd's maximum: %v", r)
	}
}

// A login etcd refuses (wrong password) is 64, for a run and for --who: retrying cannot help
// (D3); an unreachable etcd with the same user is 69 (TestExitUnavailable).
func TestLoginRefusedIs64(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for i, step := range []func() error{
		func() error { _, err := e.c.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := e.c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := e.c.UserAdd(ctx, "bob", "bobpw"); return err },
		func() error { _, err := e.c.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	for _, args := range [][]string{
		{"sema", "login", "--max", "1", "--user", "bob:wrong", "--", "true"},
		{"sema", "login", "--who", "--user", "bob:wrong"},
	} {
		if r := e.run(args...); r.status != 64 || !strings.Contains(r.stderr, "refused the login") {
			t.Errorf("%q: %v, want 64 naming the refused login", args, r)
		}
	}
}

// A closed stderr pipe does not kill a waiting conch with SIGPIPE (its key
// would linger until lease expiry, looking like a holder).
func TestClosedStderrDoesNotKillWaiter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.start("sema", "pipe", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rd.Close()
	w := exec.Command(conchBin, "sema", "pipe", "--max", "1", "--", "touch", e.path("ran"))
	w.Env, w.Stderr = e.vars, wr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	waitFor(t, "waiter queued", func() bool { return e.keys(schema.Prefix("pipe", 1)) == 2 })
	e.open("h")
	holder.wait(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiter with a closed stderr: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("waiter did not finish")
	}
	if !exists(e.path("ran")) {
		t.Fatal("the waiter's command did not run")
	}
}

// A command given without "--" whose own flags conch reads as its own (`ls -l`) gets the
// same hint as one without flags (operator trial: only "unknown flag `l'" was said).
func TestCommandWithoutDashDash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"sema", "u", "--max", "1", "ls", "-l"},
		{"sema", "u", "--max", "1", "true"},
	} {
		r := e.run(args...)
		if r.status != 64 || !strings.Contains(r.stderr, "after --") {
			t.Errorf("conch %q: %v, want 64 saying the command goes after --", args, r)
		}
	}
	if r := e.run("sema", "u", "--max", "1", "--bogus", "--", "true"); strings.Contains(r.stderr, "after --") {
		t.Errorf("an unknown flag before -- is not a misplaced command: %v", r)
	}
}
