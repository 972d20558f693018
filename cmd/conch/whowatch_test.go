package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/syncbuf"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// watchBlocks splits --who --watch's text output into its blocks, each
// without its "--- TIME rev=N" line; a block still being written is left
// out.
func watchBlocks(out string) []string {
	var blocks []string
	for _, b := range strings.Split(out, "--- ")[1:] {
		head, body, ok := strings.Cut(b, "\n")
		if !ok || !strings.Contains(head, " rev=") || !strings.HasSuffix(body, "\n") {
			continue
		}
		blocks = append(blocks, body)
	}
	return blocks
}

// lastBlock waits until the watch's last block satisfies ok and returns
// it with how long that took.
func lastBlock(t *testing.T, p *proc, what string, ok func(string) bool) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	var last string
	waitFor(t, what, func() bool {
		bs := watchBlocks(p.stdout.String())
		if len(bs) == 0 {
			return false
		}
		last = bs[len(bs)-1]
		return ok(last)
	})
	return last, time.Since(start)
}

func lines(block string) []string { return strings.Split(strings.TrimSuffix(block, "\n"), "\n") }

// --who --watch follows holders, waiters, releases, --spread node waiters
// and pauses with a new block per change; --json gives one document per
// line; Ctrl-C's SIGINT ends it, conch dying of it (D3).
func TestWhoWatchFollowsChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.start("sema", "ww", "--who", "--watch")
	wj := e.start("sema", "--who", "--watch", "--json")
	lastBlock(t, w, "the first, empty listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	h := e.start("sema", "ww", "--max", "1", "--", "sh", "-c", e.gated("h"))
	lastBlock(t, w, "the holder", func(b string) bool { return strings.HasPrefix(b, "ww[max=1] HELD") && len(lines(b)) == 1 })
	q := e.start("sema", "ww", "--max", "1", "--", "sh", "-c", e.gated("q"))
	lastBlock(t, w, "the waiter", func(b string) bool { return len(lines(b)) == 2 && strings.HasPrefix(lines(b)[1], "ww[max=1] WAIT") })
	e.open("h")
	qpid := fmt.Sprintf("pid=%d ", q.cmd.Process.Pid)
	lastBlock(t, w, "the release", func(b string) bool {
		return len(lines(b)) == 1 && strings.Contains(b, "HELD") && strings.Contains(b, qpid)
	})
	if r := e.run("sema", "ww", "--max", "1", "--pause", "--reason", "incident", "--node", "n1"); r.status != 0 {
		t.Fatalf("--pause: %v", r)
	}
	lastBlock(t, w, "the pause", func(b string) bool {
		return strings.HasPrefix(b, "PAUSED ww[max=1] paused by ") && strings.Contains(lines(b)[0], "@n1 since ") && strings.HasSuffix(lines(b)[0], ": incident")
	})
	waitFor(t, "--json's pause, decoded", func() bool {
		docs := jsonLines(t, wj.stdout.String())
		if len(docs) == 0 {
			return false
		}
		d := docs[len(docs)-1]
		return len(d.Paused) == 1 && d.Paused[0].Reason == "incident" && d.Paused[0].Who != nil && d.Paused[0].Since != nil &&
			len(d.Records) == 1 && d.Records[0].Paused != nil && d.Records[0].Paused.Reason == "incident" // each record too, as --who --json
	})
	e.c.Delete(context.Background(), schema.PauseRoot+"ww/1")
	s1 := e.start("sema", "ww", "--max", "2", "--change-max", "--spread", "--node", "n1", "--", "sleep", "60")
	s2 := e.start("sema", "ww", "--max", "2", "--change-max", "--spread", "--node", "n1", "--", "sleep", "60")
	lastBlock(t, w, "the --spread node waiter", func(b string) bool { return strings.Contains(b, "waits-for=/conch/v1/sema/ww/2/n1") })
	for _, p := range []*proc{s1, s2} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	}
	e.open("q")
	h.wait(t)
	q.wait(t)
	lastBlock(t, w, "the last release", func(b string) bool { return b == "(no holders or waiters)\n" })
	var docs []watchLine
	waitFor(t, "--json's last line: empty", func() bool {
		docs = jsonLines(t, wj.stdout.String())
		return len(docs) > 0 && len(docs[len(docs)-1].Records) == 0 && len(docs) >= 6
	})
	for p, sig := range map[*proc]syscall.Signal{w: syscall.SIGINT, wj: syscall.SIGQUIT} { // SIGQUIT ends it too (D3c)
		p.cmd.Process.Signal(sig)
		if r := p.wait(t); r.signal != sig {
			t.Fatalf("--watch after %v: %v, want death by it", sig, r)
		}
	}
}

// watchLine is one line of --who --watch --json.
type watchLine struct {
	Time     string           `json:"time"`
	Revision int64            `json:"revision"`
	Records  []who.Record     `json:"records"`
	Paused   []who.WatchPause `json:"paused"`
}

// jsonLines decodes every complete line of --who --watch --json's output.
func jsonLines(t *testing.T, out string) []watchLine {
	t.Helper()
	var docs []watchLine
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasSuffix(l, "\n") {
			break
		}
		var d watchLine
		if err := json.Unmarshal([]byte(l), &d); err != nil || d.Time == "" || d.Revision == 0 || d.Records == nil || d.Paused == nil {
			t.Fatalf("line %q is not a watch document: %v", l, err)
		}
		docs = append(docs, d)
	}
	return docs
}

// A burst of 200 changes gives a bounded number of renders, the last one
// complete; single changes show with a delay logged (the figures are in
// the benchmark notes, not asserted: timing goals are not unit tests).
func TestWhoWatchBurstAndDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.start("sema", "burst", "--who", "--watch")
	lastBlock(t, w, "the first listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	ctx := context.Background()
	began := time.Now()
	for i := range 200 {
		if _, err := e.c.Put(ctx, fmt.Sprintf("%sk%03d", schema.Prefix("burst", 1), i), "{}"); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	lastBlock(t, w, "all 200 keys", func(b string) bool { return len(lines(b)) == 200 })
	renders := len(watchBlocks(w.stdout.String())) - 1
	limit := int(took/(200*time.Millisecond)) + 5 // one per followMaxDelay at most, and slack
	t.Logf("a burst of 200 changes in %v gave %d renders (bound %d)", took.Round(time.Millisecond), renders, limit)
	if renders < 1 || renders > limit {
		t.Fatalf("%d renders for a burst of 200 changes in %v, want 1..%d", renders, took, limit)
	}
	e.c.Delete(ctx, schema.Prefix("burst", 1), clientv3.WithPrefix())
	lastBlock(t, w, "the keys gone", func(b string) bool { return b == "(no holders or waiters)\n" })
	before := len(watchBlocks(w.stdout.String()))
	began = time.Now()
	for i := range 200 { // a burst spread over longer than one coalescing delay
		e.c.Put(ctx, fmt.Sprintf("%sk%03d", schema.Prefix("burst", 1), i), "{}")
		time.Sleep(2 * time.Millisecond) // pacing the burst, not synchronisation
	}
	took = time.Since(began)
	lastBlock(t, w, "all 200 keys again", func(b string) bool { return len(lines(b)) == 200 })
	renders = len(watchBlocks(w.stdout.String())) - before
	limit = int(took/(200*time.Millisecond)) + 5
	t.Logf("a burst of 200 changes over %v gave %d renders (bound %d)", took.Round(time.Millisecond), renders, limit)
	if renders < 1 || renders > limit {
		t.Fatalf("%d renders for a burst of 200 changes over %v, want 1..%d", renders, took, limit)
	}
	e.c.Delete(ctx, schema.Prefix("burst", 1), clientv3.WithPrefix())
	lastBlock(t, w, "the keys gone again", func(b string) bool { return b == "(no holders or waiters)\n" })
	var delays []time.Duration
	for i := range 20 {
		key := fmt.Sprintf("%sone%02d", schema.Prefix("burst", 1), i)
		e.c.Put(ctx, key, "{}")
		_, d := lastBlock(t, w, key, func(b string) bool { return strings.Contains(b, "key="+key) })
		delays = append(delays, d)
		e.c.Delete(ctx, key)
		lastBlock(t, w, key+" gone", func(b string) bool { return b == "(no holders or waiters)\n" })
	}
	slices.Sort(delays)
	t.Logf("delay from a change to its block: median %v, max %v (20 changes)", delays[10].Round(time.Millisecond), delays[19].Round(time.Millisecond))
	w.cmd.Process.Signal(syscall.SIGTERM)
	if r := w.wait(t); r.signal != syscall.SIGTERM {
		t.Fatalf("--watch after SIGTERM: %v, want death by SIGTERM", r)
	}
}

// A compaction past the watch's revision (the watch stalled: conch
// stopped while 2,000 changes of 1 KiB went by, then etcd compacted) is
// said on stderr; the watch reads again and goes on.
func TestWhoWatchCompaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.start("sema", "cp", "--who", "--watch")
	lastBlock(t, w, "the first listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	w.cmd.Process.Signal(syscall.SIGSTOP)
	ctx := context.Background()
	value := strings.Repeat("x", 1024)
	var rev int64
	for range 2000 {
		resp, err := e.c.Put(ctx, schema.Prefix("cp", 1)+"churn", value)
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	e.c.Delete(ctx, schema.Prefix("cp", 1)+"churn")
	if _, err := e.c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	w.cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, "the compaction said", func() bool { return strings.Contains(w.stderr.String(), "compacted") })
	h := e.start("sema", "cp", "--max", "1", "--", "sleep", "60")
	lastBlock(t, w, "a holder after the compaction", func(b string) bool { return strings.HasPrefix(b, "cp[max=1] HELD") })
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.wait(t)
	lastBlock(t, w, "its release", func(b string) bool { return b == "(no holders or waiters)\n" })
	t.Logf("stderr: %s", w.stderr.String())
}

// An etcd restart during the watch: it says on stderr that etcd is lost,
// then that it answers again, and shows the changes made after.
func TestWhoWatchEtcdRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := newEnv(t)
	w := e.start("sema", "rs", "--who", "--watch")
	lastBlock(t, w, "the first listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	e.srv.Restart(t, 5*time.Second)
	waitFor(t, "the outage said", func() bool { return strings.Contains(w.stderr.String(), "lost etcd") })
	waitFor(t, "the recovery said", func() bool { return strings.Contains(w.stderr.String(), "answers again") })
	c := e.srv.Client(t)
	if _, err := c.Put(context.Background(), schema.Prefix("rs", 1)+"after", "{}"); err != nil {
		t.Fatal(err)
	}
	lastBlock(t, w, "a change after the restart", func(b string) bool { return strings.Contains(b, "key=/conch/v1/sema/rs/1/after") })
	w.cmd.Process.Signal(syscall.SIGINT)
	if r := w.wait(t); r.signal != syscall.SIGINT {
		t.Fatalf("--watch after SIGINT: %v", r)
	}
	t.Logf("stderr: %s", w.stderr.String())
}

// A watch whose reader goes away (`conch sema --who --watch | head -2`) and then sees a
// change ends with status 0 and nothing on stderr.
func TestWhoWatchClosedStdout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd, out, stderr := startPipedWatch(t, e, "cs")
	rd := bufio.NewReader(out)
	for range 2 { // the first block: its stamp and "(no holders or waiters)"
		if _, err := rd.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	out.Close()
	if _, err := e.c.Put(context.Background(), schema.Prefix("cs", 1)+"k", "{}"); err != nil {
		t.Fatal(err)
	}
	waitQuietEnd(t, cmd, stderr, "after its reader left")
}

// `conch sema --who --watch | head -1`: the reader goes away after the first
// line while nothing changes; the watch must end soon after, quietly, with the
// status of a reader that went away (0), not at the next change.
func TestWhoWatchClosedStdoutIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd, out, stderr := startPipedWatch(t, e, "ci")
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // head -1
		t.Fatal(err)
	}
	out.Close()
	waitQuietEnd(t, cmd, stderr, "after its reader left, with no change to show")
}

// startPipedWatch starts `conch sema NAME --who --watch` with its stdout on a pipe the test
// reads (and closes, as a reader that goes away does) and its stderr captured.
func startPipedWatch(t *testing.T, e *env, name string) (*exec.Cmd, io.ReadCloser, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(conchBin, "sema", name, "--who", "--watch")
	cmd.Env = e.vars
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out, stderr
}

// waitQuietEnd waits for cmd to end with status 0 and nothing on stderr, killing it and
// failing after testTimeout.
func waitQuietEnd(t *testing.T, cmd *exec.Cmd, stderr *syncbuf.Buffer, when string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || stderr.String() != "" {
			t.Fatalf("--watch %s: %v, stderr %q; want status 0, silent", when, err, stderr.String())
		}
	case <-time.After(testTimeout):
		cmd.Process.Kill()
		t.Fatalf("--watch did not end %s", when)
	}
}

// Hostile input during the watch and in the metrics: a hand-written record
// with control characters and wrong types, keys that do not parse (in the
// queue, the node-wait markers and the pause keys). The watch goes on,
// each --json line stays one document, the text stays printable, the
// metrics parse; a real holder after them still shows.
func TestWhoWatchHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.start("sema", "--who", "--watch")
	wj := e.start("sema", "--who", "--watch", "--json")
	lastBlock(t, w, "the first listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	ctx := context.Background()
	for k, v := range map[string]string{
		schema.Prefix("hx", 1) + "0123456789abcdef": `{"v":1,"host":"\u001b[31mevil\nline","pid":"x","since":"yesterday"}`,
		schema.KeyRoot + "bad\nname\"q\\/1/x":       "\x1b[2J not json",
		schema.NodeWaitRoot + "junk":                "{",
		schema.NodeWaitRoot + "hx/1/n\x01/zz":       "null",
		schema.PauseRoot + "hx/notanumber":          "\xff\xfe",
		schema.PauseRoot + "h\"x/1":                 `{"why":"\u202e reversed"}`,
		schema.PauseRoot + "hx/1":                   `not json at all`,
	} {
		if _, err := e.c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := lastBlock(t, w, "the hostile keys listed", func(b string) bool { return strings.Count(b, "\n") >= 7 })
	noRawControl(t, block, strings.Count(block, "\n"))
	if !strings.Contains(block, "PAUSED hx[max=1] paused by an unreadable pause record") || !strings.Contains(block, "PAUSED hx[-] paused by an unreadable pause record") {
		t.Fatalf("garbage pause keys not shown:\n%s", block)
	}
	waitFor(t, "the garbage pause keys reported on stderr", func() bool {
		return strings.Contains(w.stderr.String(), "WARNING: pause key /conch/v1/pause/hx/1 holds an unreadable record") &&
			strings.Contains(w.stderr.String(), "WARNING: pause key /conch/v1/pause/hx/notanumber names no semaphore")
	})
	r := e.run("sema", "--who", "--format", "prometheus")
	fams := whotest.ParseProm(t, r.stdout)
	if got := whotest.PromValue(fams, "conch_sema_paused", "name", "hx", "max", "1"); got != 1 {
		t.Fatalf("hx[1] paused = %v\n%s", got, r.stdout)
	}
	h := e.start("sema", "hx", "--max", "2", "--change-max", "--", "sleep", "60") // beside hx/1's keys (D17)
	lastBlock(t, w, "a real holder after them", func(b string) bool { return strings.Contains(b, "hx[max=2] HELD") })
	waitFor(t, "--json shows the holder", func() bool {
		docs := jsonLines(t, wj.stdout.String())
		return len(docs) > 0 && slices.ContainsFunc(docs[len(docs)-1].Records, func(r who.Record) bool { return r.Name == "hx" && r.Max == 2 && r.State == "HELD" })
	})
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.wait(t)
	for _, p := range []*proc{w, wj} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if r := p.wait(t); r.signal != syscall.SIGTERM {
			t.Fatalf("--watch: %v", r)
		}
	}
}

// The death of each member of a 3-member cluster in turn (quorum kept):
// the watch, given every endpoint, shows the change made while the member
// is down, whichever member its stream was on; the client moves it to a
// live member and resumes it from its revision, nothing to say. Then two
// members die: no quorum, which the watch says, and says when the cluster
// answers again, showing the change made meanwhile.
func TestWhoWatchMemberDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	ms := etcdtest.StartCluster(t, 3)
	e := newEnvOn(t, ms[0])
	e.vars = append(e.vars, "CONCH_ENDPOINTS="+etcdtest.Endpoints(ms)) // the last one counts
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcdtest.Endpoints(ms), ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := e.start("sema", "md", "--who", "--watch")
	lastBlock(t, w, "the first listing", func(b string) bool { return b == "(no holders or waiters)\n" })
	for i, m := range ms {
		m.Kill()
		key := fmt.Sprintf("%sk%d", schema.Prefix("md", 1), i)
		// the test's own write: a member's death may cost an election, during which etcd
		// answers "request timed out"; the client does not retry that, so the test does
		waitFor(t, fmt.Sprintf("a put with member %d dead", i), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := c.Put(ctx, key, "{}")
			return err == nil
		})
		_, d := lastBlock(t, w, key, func(b string) bool { return strings.Contains(b, "key="+key) })
		t.Logf("member %d dead: the change showed after %v", i, d.Round(time.Millisecond))
		m.Revive(t)
	}
	ms[0].Kill()
	ms[1].Kill()
	waitFor(t, "the lost quorum said", func() bool { return strings.Contains(w.stderr.String(), "lost etcd") })
	ms[0].Revive(t)
	key := schema.Prefix("md", 1) + "after"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.Put(ctx, key, "{}"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster answering again said", func() bool { return strings.Contains(w.stderr.String(), "answers again") })
	lastBlock(t, w, key, func(b string) bool { return strings.Contains(b, "key="+key) })
	ms[1].Revive(t)
	w.cmd.Process.Signal(syscall.SIGINT)
	if r := w.wait(t); r.signal != syscall.SIGINT {
		t.Fatalf("--watch after SIGINT: %v", r)
	}
	t.Logf("stderr: %q", w.stderr.String())
}
