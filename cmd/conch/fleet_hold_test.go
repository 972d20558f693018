package main

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// heldAfterKeys returns the keys of (name, max) whose record says they are
// kept after a run (D13), by node.
func (e *env) heldAfterKeys(name string, max int) map[string]string {
	e.t.Helper()
	recs, _ := e.whoJSON(name, "--max", strconv.Itoa(max))
	out := map[string]string{}
	for _, r := range recs {
		if r.HeldAfter != nil && r.HeldAfter.Node != nil {
			out[r.Key] = *r.HeldAfter.Node
		}
	}
	return out
}

// D11/D14: --node names the node in the holder record without --spread.
func TestNodeWithoutSpread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "nn", "--max", "1", "--node", "n7", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	recs, _ := e.whoJSON("nn")
	if len(recs) != 1 || recs[0].Host == nil || *recs[0].Host != "n7" || recs[0].Spread {
		t.Fatalf("--who --json with --node n7 and no --spread: %+v", recs)
	}
	e.open("a")
	if r := p.wait(t); r.status != 0 {
		t.Fatal(r)
	}
}

// D13, D14 end to end: the command's status is conch's; the slot stays taken
// (another job finds none) and --who shows it with node and end time, text
// and JSON; --release from another node frees nothing; from the node it
// frees it (saying which), and again frees none: exit 0 each time.
func TestHoldAfterAndRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "ha", "--max", "1", "--node", "n1", "--hold-after", "1h", "--", "sh", "-c", "exit 3")
	if r.status != 3 || !strings.Contains(r.stderr, "slot kept for 1h0m0s after the run") {
		t.Fatalf("--hold-after run: %v, want 3 and the kept line", r)
	}
	if got := e.heldAfterKeys("ha", 1); len(got) != 1 {
		t.Fatalf("held-after keys %v, want one of n1", got)
	}
	who := e.run("sema", "ha", "--max", "1", "--who")
	if who.status != 0 || !strings.Contains(who.stdout, "held-after node=n1 ended=") || !strings.Contains(who.stdout, " until=") {
		t.Fatalf("--who text: %v", who)
	}
	// the refusal says the slot is kept, by whom, until when and how to free it, on its one line
	note := regexp.MustCompile(`\(1 kept after a run by node n1 until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; conch sema ha --max 1 --release --node n1 frees it\)`)
	if r := e.run("sema", "ha", "--max", "1", "--nonblock", "--", "true"); r.status != 75 ||
		!strings.Contains(r.stderr, "no free slot: all 1 held (1 kept after a run by node n1") || !note.MatchString(r.stderr) || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("a job during the hold: %v, want 75 and the held-after note", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--wait", "1s", "--", "true"); r.status != 75 ||
		!strings.Contains(r.stderr, "no slot within --wait 1s (1 kept after a run by node n1") || !note.MatchString(r.stderr) {
		t.Fatalf("a wait during the hold: %v, want 75 and the held-after note", r)
	}
	fams := whotest.ParseProm(t, e.run("sema", "ha", "--who", "--format", "prometheus").stdout)
	for metric, v := range map[string]float64{"conch_sema_holders": 1, "conch_sema_held_after": 1, "conch_sema_expiring_holders": 0} {
		if got := whotest.PromValue(fams, metric, "name", "ha", "max", "1"); got != v {
			t.Errorf("%s = %v during the hold, want %v", metric, got, v)
		}
	}
	r = e.run("sema", "ha", "--max", "1", "--release", "--node", "n2")
	if r.status != 0 || !strings.Contains(r.stderr, "no slot held after a run by node n2") || len(e.heldAfterKeys("ha", 1)) != 1 {
		t.Fatalf("--release as n2: %v, want 0, none, n1's hold kept", r)
	}
	r = e.startWith([]string{"CONCH_NODE=n1"}, "sema", "ha", "--max", "1", "--release").wait(t)
	if r.status != 0 || !strings.Contains(r.stderr, "released the slot node n1 held after its run") || e.keys(schema.Prefix("ha", 1)) != 0 {
		t.Fatalf("--release as n1 (CONCH_NODE): %v, want 0 and the key gone", r)
	}
	if r := e.run("sema", "ha", "--max", "1", "--release", "--node", "n1"); r.status != 0 || !strings.Contains(r.stderr, "nothing to release") {
		t.Fatalf("second --release: %v", r)
	}
}

// D13: SIGTERM to conch stops the command and keeps the slot (conch dies of
// the signal, D3); a slot lost while the command ran (an operator deleted
// the key) is not kept: exit 70 and no key.
func TestHoldAfterSignalAndLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "hs", "--max", "1", "--node", "n1", "--hold-after", "1h", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	p.cmd.Process.Signal(syscall.SIGTERM)
	if r := p.wait(t); r.signal != syscall.SIGTERM || !strings.Contains(r.stderr, "slot kept") ||
		!strings.Contains(r.stderr, "SIGTERM: stopped the child; the slot is kept until ") || strings.Contains(r.stderr, "released the slot") {
		t.Fatalf("SIGTERM with --hold-after: %v, want death by SIGTERM and the slot kept", r)
	}
	if got := e.heldAfterKeys("hs", 1); len(got) != 1 {
		t.Fatalf("held-after keys after SIGTERM: %v", got)
	}
	e.run("sema", "hs", "--max", "1", "--release", "--node", "n1")
	p = e.start("sema", "hs", "--max", "1", "--node", "n1", "--hold-after", "1h", "--", "sh", "-c", e.gated("b"))
	waitFor(t, "b holds", func() bool { return e.held("b") })
	if _, err := e.c.Delete(t.Context(), schema.Prefix("hs", 1), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.status != 70 || strings.Contains(r.stderr, "slot kept") || e.keys(schema.Prefix("hs", 1)) != 0 {
		t.Fatalf("slot lost with --hold-after: %v, want 70, nothing kept", r)
	}
}

// D13: conch SIGKILLed while the command runs cannot keep anything: the
// slot frees when the run's own lease expires (--ttl), as without
// --hold-after.
func TestHoldAfterSIGKILL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start("sema", "hk", "--max", "1", "--ttl", "1s", "--hold-after", "1h", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	killed := time.Now()
	waitFor(t, "the slot frees at the run lease's expiry", func() bool { return e.keys(schema.Prefix("hk", 1)) == 0 })
	t.Logf("slot free %v after conch was SIGKILLed (--ttl 1s, --hold-after 1h)", time.Since(killed).Round(time.Millisecond))
}

// D14 against D13 on one node: --release running in a loop while
// --hold-after runs come and go never touches a supervised run's key (no
// run ends 70), and each hold is either released or still there.
func TestReleaseRacesHoldAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var releases []result // the racing --release runs' results, read after wg.Wait
	var raceErr error     // why the racing loop stopped early; checked on the test's goroutine
	wg.Add(1)
	go func() { // no t.Fatal here: a failure is handed back in raceErr
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := e.tryStart("sema", "hr", "--max", "1", "--node", "n1", "--release")
			if err != nil {
				raceErr = err
				return
			}
			select {
			case <-p.done:
				releases = append(releases, p.res)
			case <-time.After(testTimeout):
				raceErr = fmt.Errorf("--release did not exit within %v", testTimeout)
				return
			}
		}
	}()
	for i := range 6 {
		r := e.run("sema", "hr", "--max", "1", "--node", "n1", "--hold-after", "1h", "--wait", "30s", "--", "true")
		if r.status != 0 {
			close(stop)
			wg.Wait()
			t.Fatalf("run %d racing --release: %v, want 0", i, r)
		}
	}
	close(stop)
	wg.Wait()
	if raceErr != nil {
		t.Fatal(raceErr)
	}
	t.Logf("6 --hold-after runs, %d --release runs beside them", len(releases))
	for i, r := range releases { // each released a hold or found none: never an error
		if r.status != 0 || !strings.Contains(r.stderr, "released the slot node n1 held after its run") && !strings.Contains(r.stderr, "nothing to release") {
			t.Errorf("--release %d racing the runs: %v, want 0 saying what it released or that there was nothing", i, r)
		}
	}
	e.run("sema", "hr", "--max", "1", "--node", "n1", "--release")
	if n := e.keys(schema.Prefix("hr", 1)); n != 0 {
		t.Fatalf("%d keys after the last --release", n)
	}
}

// Hostile --hold-after and --release: 0, negative and huge durations, and
// the flags they cannot go with, are usage errors (64) before any etcd call.
func TestHoldAfterUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"--hold-after", "0", "--", "true"},
		{"--hold-after", "-1s", "--", "true"},
		{"--hold-after", "1000000h", "--", "true"},
		{"--hold-after", "1h", "--who"},
		{"--release", "--", "true"},
		{"--release", "--who"},
		{"--release", "--hold-after", "1h"},
		{"--release", "--nonblock"},
	} {
		r := e.run(append([]string{"sema", "hu", "--max", "1"}, args...)...)
		if r.status != 64 || r.stderr == "" {
			t.Errorf("%q: %v, want 64 with a line", args, r)
		}
	}
	if r := e.run("sema", "hu", "--release"); r.status != 64 || !strings.Contains(r.stderr, "--max") {
		t.Errorf("--release without --max: %v", r)
	}
	if n := e.keys("/conch/"); n != 0 {
		t.Fatalf("%d keys written by refused invocations", n)
	}
}

// Hostile --hold-after: the largest duration conch takes (100 years) is a
// lease etcd grants, and the hold says so; --release frees it at once.
func TestHoldAfterHuge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "hh", "--max", "1", "--node", "n1", "--hold-after", "876000h", "--", "true")
	if r.status != 0 || !strings.Contains(r.stderr, "slot kept for 876000h0m0s after the run, until 21") {
		t.Fatalf("--hold-after 876000h: %v", r)
	}
	if r := e.run("sema", "hh", "--max", "1", "--release", "--node", "n1"); r.status != 0 || e.keys(schema.Prefix("hh", 1)) != 0 {
		t.Fatalf("--release of a 100-year hold: %v", r)
	}
}

// D13 in --who: a slot kept after its run is on a lease nobody renews, so
// once less than half of it is left it is still not flagged expiring (nor
// lease-mismatch: its name keeps the run's lease), in
// JSON, text or metrics (a live holder's would be).
func TestHoldAfterNotExpiring(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	e := newEnv(t)
	if r := e.run("sema", "hx", "--max", "1", "--node", "n1", "--hold-after", "20s", "--", "true"); r.status != 0 {
		t.Fatalf("--hold-after run: %v", r)
	}
	waitFor(t, "the hold's lease below half its TTL", func() bool {
		recs, _ := e.whoJSON("hx", "--max", "1")
		if len(recs) != 1 || recs[0].TTL == nil || recs[0].GrantedTTL == nil {
			t.Fatalf("--who --json during the hold: %+v", recs)
		}
		r := recs[0]
		if r.HeldAfter == nil || r.Expiring || len(r.Flags) != 0 {
			t.Fatalf("a held-after slot listed %+v, want held_after set, not expiring and no flag (its fresh lease is by design)", r)
		}
		return *r.TTL*2 < *r.GrantedTTL
	})
	fams := whotest.ParseProm(t, e.run("sema", "hx", "--who", "--format", "prometheus").stdout)
	who := e.run("sema", "hx", "--max", "1", "--who")
	if whotest.PromValue(fams, "conch_sema_holders", "name", "hx", "max", "1") == 1 && // else the hold ran out meanwhile
		(whotest.PromValue(fams, "conch_sema_expiring_holders", "name", "hx", "max", "1") != 0 || whotest.PromValue(fams, "conch_sema_held_after", "name", "hx", "max", "1") != 1) {
		t.Fatalf("metrics of a held-after slot below half its TTL: %v", fams)
	}
	if strings.Contains(who.stdout, "expiring") {
		t.Fatalf("--who of a held-after slot below half its TTL: %v", who)
	}
}

// D13, D13b: a conch stopped past its run's lease while its command exits 0 cannot keep the
// slot (etcd expired the lease and the key with it): it says so in a warning line without -v,
// naming the lease's expiry, and exits with the command's status; nothing is kept.
func TestHoldAfterLeaseExpiredWhileStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	done := e.path("done")
	p := e.start("sema", "hx", "--max", "1", "--ttl", "2", "--kill-after", "0.2", "--scope=never", "--hold-after", "1h",
		"--", "sh", "-c", e.gated("a")+"; touch "+done)
	waitFor(t, "a holds", func() bool { return e.held("a") })
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.open("a")
	waitFor(t, "the command to end while conch is stopped", func() bool { return exists(done) })
	waitFor(t, "the run's lease to expire", func() bool { return e.keys(schema.Prefix("hx", 1)) == 0 })
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	late := strings.Contains(r.stderr, "lease expired") || strings.Contains(r.stderr, "deadline had passed")
	// (conch notices the loss first, or finds the key gone as it moves it: either is said)
	if r.status != 0 || !strings.Contains(r.stderr, "after the run") || !strings.Contains(r.stderr, "the next holder may start now") || !late ||
		strings.Contains(r.stderr, "slot kept") || strings.Contains(r.stderr, "key deleted") {
		t.Fatalf("--hold-after, conch stopped past its lease: %v, want 0 and a line saying the slot cannot be kept as the lease expired", r)
	}
	if n := e.keys(schema.Prefix("hx", 1)); n != 0 {
		t.Fatalf("%d keys after a hold that could not be made", n)
	}
}

// runOnHost runs conch with args to completion in a UTS namespace of its own whose hostname
// is host (unshare(1), root), as e.run does.
func (e *env) runOnHost(host string, args ...string) result {
	e.t.Helper()
	if err := exec.Command("unshare", "--uts", "true").Run(); err != nil {
		ci.Unavailable(e.t, "cannot make a UTS namespace to set a hostname (unshare --uts, root): %v", err)
	}
	argv := append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, host, conchBin}, args...)
	cmd := exec.Command("unshare", argv...)
	cmd.Env = e.vars
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatal(err)
	}
	return result{status: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// D11a: one rule for a node's name, whether given (--node, CONCH_NODE) or the hostname's
// default: on a host named as a lease ID (16 lower-case hex digits), --hold-after and
// --release refuse it (64, nothing written) rather than keep a slot that --release --node
// cannot free, and --node names the node instead; a run that does not use the node runs.
func TestNodeNameOneRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const hexHost = "0123456789abcdef"
	if r := e.runOnHost(hexHost, "sema", "nr", "--max", "1", "--hold-after", "1h", "--", "true"); r.status != exitUsage ||
		!strings.Contains(r.stderr, "set --node NAME") || e.keys(schema.Prefix("nr", 1)) != 0 {
		t.Fatalf("--hold-after on host %s: %v, want 64 naming --node and no key", hexHost, r)
	}
	if r := e.runOnHost(hexHost, "sema", "nr", "--max", "1", "--release"); r.status != exitUsage {
		t.Fatalf("--release on host %s: %v, want 64", hexHost, r)
	}
	if r := e.runOnHost(hexHost, "sema", "nr", "--max", "1", "--", "true"); r.status != 0 {
		t.Fatalf("a plain run on host %s: %v, want 0", hexHost, r)
	}
	if r := e.runOnHost(hexHost, "sema", "nr", "--max", "1", "--node", "n1", "--hold-after", "1h", "--", "true"); r.status != 0 {
		t.Fatalf("--hold-after --node n1 on host %s: %v, want 0", hexHost, r)
	}
	if r := e.run("sema", "nr", "--max", "1", "--release", "--node", hexHost); r.status != exitUsage {
		t.Fatalf("--release --node %s: %v, want 64", hexHost, r)
	}
}

// D11a: an empty --node is refused (64), not read as the hostname; a CONCH_NODE that is no
// node name stops only the commands that use the node (a run, --release), not --who,
// --pause or --resume.
func TestNodeCheckedWhereUsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{"--release", "--node", ""}, {"--node", "", "--", "true"}} {
		if r := e.run(append([]string{"sema", "ne", "--max", "1"}, args...)...); r.status != exitUsage || !strings.Contains(r.stderr, "empty") {
			t.Fatalf("%q: %v, want 64: an empty --node", args, r)
		}
	}
	bad := []string{"CONCH_NODE=not a node"}
	for _, args := range [][]string{{"--who"}, {"--pause"}, {"--resume"}} {
		if r := e.startWith(bad, append([]string{"sema", "ne", "--max", "1"}, args...)...).wait(t); r.status == exitUsage {
			t.Fatalf("%q with a bad CONCH_NODE: %v, want no usage error: it does not use the node", args, r)
		}
	}
	for _, args := range [][]string{{"--release"}, {"--", "true"}} {
		if r := e.startWith(bad, append([]string{"sema", "ne", "--max", "1"}, args...)...).wait(t); r.status != exitUsage {
			t.Fatalf("%q with a bad CONCH_NODE: %v, want 64", args, r)
		}
	}
}

// D13d: an etcd stall shorter than what is left of the run's lease (here 7 s of --ttl 30s, the
// single member SIGSTOPped as the command ends) does not make --hold-after give up: the hold
// is made once etcd answers again, and the slot is kept.
func TestHoldAfterRidesOutEtcdStall(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	p := e.start("sema", "hst", "--max", "1", "--ttl", "30", "--node", "n1", "--hold-after", "1h", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	m.stall(7*time.Second, func() { e.open("a") }) // longer than a single request's old 5 s bound
	r := p.wait(t)
	if r.status != 0 || !strings.Contains(r.stderr, "slot kept for 1h0m0s after the run") || strings.Contains(r.stderr, "cannot") {
		t.Fatalf("--hold-after through a 7 s etcd stall: %v, want 0 and the slot kept", r)
	}
	if got := e.heldAfterKeys("hst", 1); len(got) != 1 {
		t.Fatalf("held-after keys after the stall: %v, want n1's", got)
	}
}

// D13d: with etcd silent past the run's lease (--ttl 3, the member SIGSTOPped as the command
// ends), the hold cannot be made nor the slot released: conch says both in one warning line
// of its own (every line it writes starts "conch:"), and exits with the command's status.
func TestHoldAfterEtcdSilentOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	m := startEtcdProc(t)
	e := m.env(t)
	p := e.start("sema", "hsl", "--max", "1", "--ttl", "3", "--kill-after", "0.5", "--node", "n1", "--hold-after", "1h", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	m.stop()
	e.open("a")
	r := p.wait(t)
	m.cont()
	if !strings.Contains(r.stderr, "cannot keep") || strings.Contains(r.stderr, "slot kept") {
		t.Fatalf("--hold-after with etcd silent: %v, want a line saying the slot cannot be kept", r)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(line, "conch: ") {
			t.Errorf("a line without conch's prefix: %q\n%v", line, r)
		}
	}
}

// D14a: --release leaves alone a key whose record names the node and says held-after, but
// in a format newer than this conch reads ("v":99, hand-written here behind a real hold),
// and says so; it frees the node's slot of the known format, and exits 0.
func TestReleaseLeavesNewerRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "nv", "--max", "1", "--node", "n1", "--hold-after", "1h", "--", "true"); r.status != 0 {
		t.Fatal(r)
	}
	key := schema.Prefix("nv", 1) + "00000000000000ff"
	val := `{"v":99,"host":"n1","pid":1,"since":"2026-12-01T00:00:00Z","state":"held-after","ended":"2026-12-01T00:00:00Z","held_until":"2026-12-01T01:00:00Z"}`
	if _, err := e.c.Put(t.Context(), key, val); err != nil {
		t.Fatal(err)
	}
	r := e.run("sema", "nv", "--max", "1", "--release", "--node", "n1")
	if r.status != 0 || !strings.Contains(r.stderr, "released the slot node n1 held after its run") ||
		!strings.Contains(r.stderr, `left "`+key+`" alone`) || !strings.Contains(r.stderr, "newer format") {
		t.Fatalf("--release with a newer record: %v, want 0, the known hold freed and the newer one left, said", r)
	}
	if n := e.keys(schema.Prefix("nv", 1)); n != 1 {
		t.Fatalf("%d keys after --release, want the newer record's only", n)
	}
}
