package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/internal/etcdtest"
)

// rulesFile is the alert rules the manual recommends (docs/watching.md), from the root.
const rulesFile = "contrib/prometheus/conch-rules.yml"

// promtoolCache is where scripts/test-deps.sh unpacks Debian's prometheus package without
// installing it (its postinst would start a Prometheus server): promtool is its only use.
const promtoolCache = "/var/cache/conch-test/prometheus/usr/bin/promtool"

// stateTimeout bounds the wait for one state of the scripted queue (a holder's lease expiring
// takes up to the default TTL, 10 s).
const stateTimeout = time.Minute

// promtool returns the path of promtool: on the PATH, or where scripts/test-deps.sh put it.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := os.Stat(promtoolCache); err == nil {
		return promtoolCache
	}
	ci.Unavailable(t, "promtool not found on the PATH or at %s: run scripts/test-deps.sh", promtoolCache)
	return ""
}

// The alert rules shipped in contrib fire on the faults they are for and stay quiet on the
// shipped units' normal behaviour, fed with series conch itself produced: a scripted queue
// runs against a real etcd, each state's `conch sema --who --format prometheus` passes
// `promtool check metrics`, and `promtool test rules` runs the cases built from them.
func TestAlertRules(t *testing.T) {
	tool := promtool(t)
	rules, err := filepath.Abs(filepath.Join(root, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	q := newQueue(t, tool)
	caps := q.script(t)
	cases := alertCases(caps)
	file := promtoolTests(t, rules, cases)
	out, err := exec.Command(tool, "test", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	fired := map[string]bool{}
	for _, c := range cases {
		for _, e := range c.evals {
			if e.fires {
				fired[e.alert] = true
			}
		}
	}
	for _, a := range alertNames(t, rules) {
		if !fired[a] {
			t.Errorf("%s: no test case shows it firing", a)
		}
	}
	t.Logf("%d captures checked with promtool check metrics; %d cases, %d alerts shown firing and quiet", q.checked, len(cases), len(fired))
}

// queue is a scripted queue: conch built from this tree, a real etcd, and the conch
// processes started in the background.
type queue struct {
	tool, conch string
	env         []string
	srv         *etcdtest.Server
	bg          []*exec.Cmd
	checked     int // captures that passed promtool check metrics
}

func newQueue(t *testing.T, tool string) *queue {
	t.Helper()
	conch := conchBinary(t)
	srv := etcdtest.Start(t)
	q := &queue{tool: tool, conch: conch, srv: srv,
		env: append(os.Environ(), "CONCH_ENDPOINTS="+srv.Endpoint, "CONCH_CONFIG=/dev/null", "CONCH_NODE=node1")}
	t.Cleanup(q.stopAll)
	return q
}

// run runs conch with args and returns its stdout, stderr and exit status.
func (q *queue) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, q.conch, args...)
	cmd.Env = q.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return o.String(), e.String(), exit.ExitCode()
	}
	t.Fatalf("conch %v: %v\n%s", args, err, e.String())
	return "", "", -1
}

// start starts conch with args in the background (a holder or a waiter) and returns it.
func (q *queue) start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(q.conch, args...)
	cmd.Env = q.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	q.bg = append(q.bg, cmd)
	return cmd
}

// stop sends conch SIGTERM (it stops its child and releases its slot) and waits for it.
func (q *queue) stop(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

func (q *queue) stopAll() {
	for _, c := range q.bg {
		q.stop(c)
	}
}

// sample is one metrics file: each series, as `name{labels}`, and its value.
type sample map[string]float64

var promLine = regexp.MustCompile(`^([a-z_]+\{[^}]*\}) (\S+)$`)

// capture writes the metrics as conch-metrics.service does, checks them with promtool check
// metrics, and returns them parsed.
func (q *queue) capture(t *testing.T) sample {
	t.Helper()
	out, errOut, status := q.run(t, "sema", "--who", "-q", "--format", "prometheus")
	if status != 0 && status != 1 {
		t.Fatalf("--who --format prometheus: exit %d: %s", status, errOut)
	}
	s := sample{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := promLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected metrics line %q", l)
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", l, err)
		}
		s[m[1]] = v
	}
	if out != "" {
		check := exec.Command(q.tool, "check", "metrics")
		check.Stdin = strings.NewReader(out)
		if res, err := check.CombinedOutput(); err != nil {
			t.Fatalf("promtool check metrics: %v\n%s\nof:\n%s", err, res, out)
		}
		q.checked++
	}
	return s
}

// until captures the metrics until want holds for them (each series named must have that
// value) and returns that capture.
func (q *queue) until(t *testing.T, what string, want sample) sample {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		s := q.capture(t)
		ok := true
		for k, v := range want {
			if s[k] != v { // a series absent from the file is 0 here
				ok = false
			}
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; the metrics are %v", what, stateTimeout, s)
		}
		time.Sleep(100 * time.Millisecond) // polling the queue's state, not a synchronisation by time
	}
}

// captures are the states of the scripted queue, each the metrics file in that state.
type captures struct {
	worker     sample // batch-worker --max 2: two daemons holding, a standby waiting
	maint      sample // node-maintenance --max 2: a round, two nodes working
	paused     sample // node-maintenance --max 2 paused, nothing running
	kept       sample // rolling-reboot --max 1: the slot kept after `systemctl reboot` ran
	job        sample // reindex --max 1 (conch-job@): one job running, one waiting
	alive      sample // video-encode --max 2: a holder whose conch runs
	expiring   sample // video-encode --max 2: the same holder after its conch was killed
	foreign    sample // a key written by hand under a capacity that is not canonical
	capacities sample // deploy with --max 1 on one node and --max 2 on another
}

func m(name, sem, max string) string {
	return fmt.Sprintf(`%s{name=%q,max=%q}`, name, sem, max)
}

// script runs the queue through each state and captures it.
func (q *queue) script(t *testing.T) captures {
	t.Helper()
	var c captures
	sleep := []string{"--", "sleep", "3600"}
	w := []*exec.Cmd{
		q.start(t, append([]string{"sema", "batch-worker", "--max", "2"}, sleep...)...),
		q.start(t, append([]string{"sema", "batch-worker", "--max", "2"}, sleep...)...),
	}
	q.until(t, "two workers", sample{m("conch_sema_holders", "batch-worker", "2"): 2})
	w = append(w, q.start(t, append([]string{"sema", "batch-worker", "--max", "2"}, sleep...)...))
	c.worker = only(q.until(t, "two workers and a standby", sample{m("conch_sema_holders", "batch-worker", "2"): 2, m("conch_sema_waiters", "batch-worker", "2"): 1}), "batch-worker")
	for _, p := range w {
		q.stop(p)
	}

	a := q.start(t, append([]string{"sema", "node-maintenance", "--max", "2", "--nonblock", "--runtime-max", "50m"}, sleep...)...)
	b := q.start(t, append([]string{"sema", "node-maintenance", "--max", "2", "--nonblock", "--runtime-max", "50m"}, sleep...)...)
	c.maint = only(q.until(t, "a maintenance round", sample{m("conch_sema_holders", "node-maintenance", "2"): 2}), "node-maintenance")
	q.stop(a)
	q.stop(b)
	q.until(t, "the round's end", sample{m("conch_sema_holders", "node-maintenance", "2"): 0})
	if _, e, st := q.run(t, "sema", "node-maintenance", "--max", "2", "--pause", "--reason", "incident"); st != 0 {
		t.Fatalf("--pause: %d %s", st, e)
	}
	c.paused = only(q.until(t, "paused", sample{m("conch_sema_paused", "node-maintenance", "2"): 1}), "node-maintenance")
	if _, e, st := q.run(t, "sema", "node-maintenance", "--max", "2", "--resume"); st != 0 {
		t.Fatalf("--resume: %d %s", st, e)
	}

	if _, e, st := q.run(t, "sema", "rolling-reboot", "--max", "1", "--nonblock", "--hold-after", "30m", "--", "true"); st != 0 {
		t.Fatalf("a rolling reboot's run: %d %s", st, e)
	}
	c.kept = only(q.until(t, "a slot kept after the run", sample{m("conch_sema_held_after", "rolling-reboot", "1"): 1}), "rolling-reboot")
	if _, e, st := q.run(t, "sema", "rolling-reboot", "--max", "1", "--release"); st != 0 {
		t.Fatalf("--release: %d %s", st, e)
	}

	j := q.start(t, append([]string{"sema", "reindex", "--max", "1", "--wait", "20m"}, sleep...)...)
	q.until(t, "a job", sample{m("conch_sema_holders", "reindex", "1"): 1})
	k := q.start(t, append([]string{"sema", "reindex", "--max", "1", "--wait", "20m"}, sleep...)...)
	c.job = only(q.until(t, "a job and a waiter", sample{m("conch_sema_waiters", "reindex", "1"): 1}), "reindex")
	q.stop(k)
	q.stop(j)

	// --ttl 3: its lease reads as expiring (half of it gone) 1.5 s after the kill, not 5 s
	v := q.start(t, append([]string{"sema", "video-encode", "--max", "2", "--ttl", "3"}, sleep...)...)
	c.alive = only(q.until(t, "a holder", sample{m("conch_sema_holders", "video-encode", "2"): 1}), "video-encode")
	if err := v.Process.Kill(); err != nil { // SIGKILL: its guardian ends the child, nobody renews the lease
		t.Fatal(err)
	}
	_ = v.Wait()
	c.expiring = only(q.until(t, "an expiring holder", sample{m("conch_sema_expiring_holders", "video-encode", "2"): 1}), "video-encode")

	cli := q.srv.Client(t)
	if _, err := cli.Put(t.Context(), "/conch/v1/sema/hand-made/01/x", "x"); err != nil {
		t.Fatal(err)
	}
	c.foreign = only(q.until(t, "a key conch did not write", sample{`conch_sema_foreign_keys{name="hand-made"}`: 1}), "hand-made")
	if _, err := cli.Delete(t.Context(), "/conch/v1/sema/hand-made/01/x"); err != nil {
		t.Fatal(err)
	}

	d1 := q.start(t, append([]string{"sema", "deploy", "--max", "1", "--change-max"}, sleep...)...)
	d2 := q.start(t, append([]string{"sema", "deploy", "--max", "2", "--change-max"}, sleep...)...) // a second capacity on purpose (D17)
	c.capacities = only(q.until(t, "two capacities", sample{m("conch_sema_holders", "deploy", "1"): 1, m("conch_sema_holders", "deploy", "2"): 1}), "deploy")
	q.stop(d1)
	q.stop(d2)
	return c
}

// only keeps the series of semaphore name: the captures are taken in one etcd, where other
// states may linger (a lease runs out in its own time).
func only(s sample, name string) sample {
	out := sample{}
	for k, v := range s {
		if strings.Contains(k, fmt.Sprintf(`name=%q`, name)) {
			out[k] = v
		}
	}
	return out
}
