package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// An operator's second day: what a first use under systemd and a hostile test of inputs
// found. Each test here fails without its fix.

// STATUS= carries the scope's exact escaped name: systemd drops a single backslash from a
// notify message, so conch doubles it (notifyEscape). tests/vm TestStatusNamesScope checks
// the name systemctl then shows.
func TestStatusKeepsEscapedScopeName(t *testing.T) {
	var notes []string
	r := &reporter{name: "batch-worker", max: 2, rev: 41, w: &strings.Builder{}, notify: func(s string) { notes = append(notes, s) }}
	r.scope = `conch-sema-batch\x2dworker-41.scope`
	r.started(830)
	want := `READY=1` + "\n" + `STATUS=holding batch-worker[max=2], rev 41: command running (PID 830 in conch-sema-batch\\x2dworker-41.scope)`
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notify messages %q, want %q", notes, want)
	}
}

// A repeated --max (or --node, or a duration) is refused with 64 before any etcd call,
// not the last value taken; so are a negative value written with a blank, a bad --scope
// (one message style), an empty --config or CONCH_CONFIG, and an empty command.
func TestOperatorUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rev := e.srv.Revision()
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--max", "1", "--max", "3"}, "invalid value for `--max': given more than once (\"1\", then \"3\")"},
		{"", []string{"--max", "1", "--node", "a", "--node", "b"}, "`--node': given more than once"},
		{"", []string{"--max", "1", "--ttl", "5", "--ttl", "9"}, "`--ttl': given more than once"},
		{"", []string{"--max", "1", "--wait", "1", "--wait=2"}, "`--wait': given more than once"},
		{"", []string{"--max", "1", "--wait", "-1"}, "invalid value for `--wait': invalid duration \"-1\": must not be negative"},
		{"", []string{"--max", "1", "--kill-after", "-5s"}, "invalid value for `--kill-after': invalid duration \"-5s\": must not be negative"},
		{"", []string{"--max", "1", "--scope=maybe"}, "invalid value for `--scope': \"maybe\": use auto, always or never"},
		{"", []string{"--max", "1", "--config", ""}, "invalid value for `--config': empty"},
		{"CONCH_CONFIG=", []string{"--max", "1"}, "CONCH_CONFIG is set but empty"},
	} {
		argv := append(append([]string{"sema", "op-usage"}, tc.args...), "--", "true")
		p := exec.Command(conchBin, argv...)
		p.Env = e.vars
		if tc.env != "" {
			p.Env = append(p.Env, tc.env)
		}
		out, err := p.CombinedOutput()
		if p.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s conch %q: %v\n%s\nwant 64 and %q", tc.env, argv, err, out, tc.want)
		}
	}
	r := e.run("sema", "op-usage", "--max", "1", "--", "")
	if r.status != exitUsage || !strings.Contains(r.stderr, "the command after -- is empty") {
		t.Errorf(`-- "": %v, want 64`, r)
	}
	if got := e.srv.Revision(); got != rev {
		t.Errorf("refused invocations wrote to etcd: revision %d -> %d", rev, got)
	}
}

// A config or password file on /proc (fstat calls /proc/kmsg a regular file; reading it
// blocks and consumes the kernel's log) is refused before a byte is read, at once.
func TestPseudoFilesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"--config", "/proc/kmsg"},
		{"--password-file", "/proc/kmsg", "--user", "u"},
		{"--config", "/proc/self/status"},
		{"--config", "/sys/kernel/mm/transparent_hugepage/enabled"},
	} {
		argv := append(append([]string{"sema", "op-proc", "--max", "1"}, args...), "--", "true")
		r := e.run(argv...)
		if r.status != exitUsage || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("conch %q: %v, want 64: not a regular file", argv, r)
		}
	}
}

// A config file the user may not read says what to do (run as root, a group, --config,
// CONCH_ENDPOINTS), with no usage hint; it still exits 64 before any etcd call.
func TestConfigPermissionDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run conch as another user") // the tests run as root (README)
	}
	e := newEnv(t)
	dir, err := os.MkdirTemp("", "conch-perm-") // t.TempDir's parent is root's only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "conch")
	data, err := os.ReadFile(conchBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conch.conf")
	if err := os.WriteFile(conf, []byte("[etcd]\nendpoints = "+e.srv.Endpoint+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "sema", "--who", "--config", conf)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	msg := string(out)
	if cmd.ProcessState == nil {
		t.Fatalf("conch as nobody: %v", err)
	}
	if cmd.ProcessState.ExitCode() != exitUsage || strings.Contains(msg, "Try 'conch sema --help'") ||
		strings.Count(strings.TrimSpace(msg), "\n") != 0 {
		t.Errorf("status %d, output:\n%s\nwant 64 and one line without a usage hint", cmd.ProcessState.ExitCode(), msg)
	}
	for _, w := range []string{"permission denied", "run conch as root", "chgrp", "--config FILE", "CONCH_ENDPOINTS"} {
		if !strings.Contains(msg, w) {
			t.Errorf("the message lacks %q:\n%s", w, msg)
		}
	}
}

// The default endpoint's source says where to set another one.
func TestDefaultEndpointSaysWhereToSetIt(t *testing.T) {
	s, err := resolveConn(connOptions{}, fixedEnv(nil), os.DevNull, true)
	if got := s.Where(); err != nil || !strings.Contains(got, "(from the default; set `endpoints =` in /etc/conch/conch.conf") {
		t.Errorf("Where() = %q, %v", got, err)
	}
}

// --ttl rounds up (D4): 0.1 is a 1 s lease, used.
func TestTTLRoundsUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "op-ttl", "--max", "1", "--ttl", "0.1", "-v", "--", "true")
	if r.status != 0 || !strings.Contains(r.stderr, "ttl=1s") {
		t.Errorf("--ttl 0.1: %v, want 0 and a 1s lease", r)
	}
	if r := e.run("sema", "op-ttl", "--max", "1", "--ttl", "0", "--", "true"); r.status != exitUsage {
		t.Errorf("--ttl 0: %v, want 64", r)
	}
}

// The short-TTL warning names the TTL etcd granted (a stock etcd raises 1 s to 2 s, which
// -v says), suggests a shorter --kill-after too, and -q silences it.
func TestShortTTLWarning(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, etcdtest.StartConfig(t, etcdtest.Config{ElectionMs: 1000}))
	r := e.run("sema", "op-short", "--max", "1", "--ttl", "1", "-v", "--", "true")
	if r.status != 0 || !strings.Contains(r.stderr, "etcd granted a 2s lease for --ttl 1s") ||
		!strings.Contains(r.stderr, "WARNING: --kill-after 5s is too long to stop the child before a 2s lease could expire") ||
		!strings.Contains(r.stderr, "or --kill-after 300ms or less") {
		t.Errorf("--ttl 1 -v: %v", r)
	}
	if r := e.run("sema", "op-short", "--max", "1", "--ttl", "1", "-q", "--", "true"); r.status != 0 || r.stderr != "" {
		t.Errorf("--ttl 1 -q: %v, want silence", r)
	}
}

// A child that ignores its stop signal: the move to SIGKILL is said when it happens.
func TestEscalationToSIGKILLReported(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	r := e.run("sema", "op-kill", "--max", "1", "--scope=never", "--kill-after", "1", "--runtime-max", "1", "--",
		"sh", "-c", "trap '' TERM; sleep 30")
	if r.status != exitRuntimeMax || !regexp.MustCompile(`did not stop within 1s of SIGTERM \(--kill-after\): it is killed with SIGKILL`).MatchString(r.stderr) {
		t.Errorf("%v, want 124 and the escalation said", r)
	}
	r = e.run("sema", "op-kill", "--max", "1", "--scope=never", "--kill-after", "1", "--runtime-max", "1", "--", "sleep", "30")
	if r.status != exitRuntimeMax || strings.Contains(r.stderr, "SIGKILL") {
		t.Errorf("a child that stops at SIGTERM: %v, want 124 and no SIGKILL line", r)
	}
}

// A holder frozen past its TTL finds, when it thaws, its key gone with its expired lease:
// that is said as the lease's expiry or the stall, not as an operator's deletion of the key
// (D7d). Which notices first after the thaw is a race (D7b): the key's DELETE (the lease
// expired), conch's late fence (its deadline had passed) or, as only conch is stopped here,
// the guardian's own fence; sema's TestGoneErrAfterDeadline checks the DELETE's wording alone.
func TestFrozenHolderSaysLeaseExpired(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	started := e.path("started")
	p := e.start("sema", "op-frozen", "--max", "1", "--ttl", "2", "--kill-after", "0.2", "--scope=never", "--", "sh", "-c", "touch "+started+"; exec sleep 60")
	waitFor(t, "the child to start", func() bool { return exists(started) })
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key to expire", func() bool { return e.keys(schema.NamePrefix("op-frozen")) == 0 })
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	said := strings.Contains(r.stderr, "lease expired") || strings.Contains(r.stderr, "deadline had passed") ||
		strings.Contains(r.stderr, guardianFencedLine)
	if r.status != exitSlotLost || !said || strings.Contains(r.stderr, "key deleted") {
		t.Errorf("%v, want 70: the lease expired or conch was late, not a deletion", r)
	}
}
