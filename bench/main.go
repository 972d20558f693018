// Command bench is the benchmark harness: conch against
// `etcdctl lock` on one throw-away single-node etcd, side by side, in one run.
//
// It starts etcd with scripts/etcd-local.sh (loopback, free ports, /metrics
// on a port of its own), runs six scenarios, prints one table and writes
// docs/benchmarks.md with the machine and the date:
//
//  1. uncontended: wall time and peak RSS of `conch sema b --max 1 -- true`
//     vs `etcdctl lock b true`;
//  2. hand-off latency, from the holder's child's last instruction to the
//     next child's first (bench-stamp writes both), conch --max 1, etcdctl
//     lock, conch --max 4, next to one etcd put and the floor;
//  3. cost to etcd per acquisition and release from the server's /metrics,
//     W = 1, 10, 100, 500 waiters, --max 1 and --max 10;
//  4. drain of 300 `sleep 0.05` jobs through --max 10 vs the ideal, and the
//     RSS of a waiting conch;
//  5. 10,000 waiters on one semaphore as in-process sema clients (each its
//     own lease and key): keep-alive cost per waiter for two cadences, etcd
//     CPU and RSS, enqueue latency of the first vs the last 100, a drain in
//     random release order with watch events per release and no waiter
//     starved.
//
// Every figure is a median (p99 where stated) over repetitions interleaved
// between the tools, and every comparison is a ratio within the same run.
// Only processes it started are ever signalled, by PID.
//
// Usage (from the repository root, after `make build etcd`):
//
//  6. under systemd (inside an nspawn node, as the integration tests boot
//     theirs): conch in scope mode, conch --scope never, etcdctl lock and
//     `etcdctl lock -- systemd-run --scope`, started from a transient service:
//     hand-off, uncontended wall, a scope's creation step by step
//     (bench/scope, run as bin/bench-scope).
//
//     bin/bench [-quick] [-only 1,2,3,4,5,6] [-waiters 10000] [-out docs/benchmarks.md]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
)

type config struct {
	binDir   string
	script   string
	out      string
	analysis string
	quick    bool
	only     map[int]bool

	reps1    int           // scenario 1: runs per tool
	rounds2  int           // scenario 2: batches per variant
	batch2   int           // scenario 2: hand-offs per batch
	hold2    time.Duration // scenario 2: how long each child holds
	ws3      []int         // scenario 3: queue lengths
	probes3  int           // scenario 3: enqueue probes per W
	etcdctl3 bool          // scenario 3: etcdctl lock rows too
	jobs4    int           // scenario 4: jobs
	max4     int
	job4     time.Duration
	reps4    int
	perf4    string // scenario 4: directory for `perf record -a -g` of each gated drain
	alt      string // another conch binary measured beside bin/conch (A/B of a patch)

	waiters5      int           // scenario 5: waiters on one semaphore
	max5          int           // scenario 5: --max
	conns5        int           // scenario 5: clientv3 connections the waiters share
	ttl5          time.Duration // scenario 5: lease TTL
	window5       time.Duration // scenario 5: steady window for keep-alive figures
	hold5         time.Duration // scenario 5: mean hold (uniform 0..2x): releases in random order
	lost5         int           // scenario 5: waiters whose lease is revoked mid-drain
	drainTimeout5 time.Duration

	reps6   int  // scenario 6: uncontended runs per variant
	rounds6 int  // scenario 6: hand-off batches per variant
	batch6  int  // scenario 6: hand-offs per batch
	hold6   int  // scenario 6: ms each child of a batch holds
	probes6 int  // scenario 6: step-by-step probes of a scope's creation
	trace6  bool // scenario 6: CONCH_TRACE=1 (a build with bench/trace/points.patch)
}

func parseConfig() config {
	c := config{}
	only := flag.String("only", "1,2,3,4,5,6", "scenarios to run, comma-separated")
	flag.StringVar(&c.binDir, "bin", "bin", "directory holding conch, etcd, etcdctl and bench-stamp")
	flag.StringVar(&c.script, "etcd-script", "scripts/etcd-local.sh", "script that starts a throw-away etcd")
	flag.StringVar(&c.out, "out", "docs/benchmarks.md", "markdown report to write (empty: none)")
	flag.StringVar(&c.analysis, "analysis", "bench/analysis.md", "hand-written analysis appended to the report (empty: none)")
	flag.BoolVar(&c.quick, "quick", false, "fewer repetitions (about a third of the time), for a quick rerun")
	flag.IntVar(&c.reps1, "reps1", 30, "scenario 1: runs per tool")
	flag.IntVar(&c.rounds2, "rounds2", 8, "scenario 2: batches per variant")
	flag.IntVar(&c.batch2, "batch2", 25, "scenario 2: hand-offs per batch")
	flag.DurationVar(&c.hold2, "hold2", 20*time.Millisecond, "scenario 2: how long each child holds the slot")
	ws := flag.String("ws3", "1,10,100,500", "scenario 3: queue lengths W")
	flag.IntVar(&c.probes3, "probes3", 3, "scenario 3: enqueue probes per W")
	flag.BoolVar(&c.etcdctl3, "etcdctl3", true, "scenario 3: also measure etcdctl lock (--max 1 only)")
	flag.IntVar(&c.jobs4, "jobs4", 300, "scenario 4: jobs")
	flag.IntVar(&c.max4, "max4", 10, "scenario 4: --max")
	flag.DurationVar(&c.job4, "job4", 50*time.Millisecond, "scenario 4: job length (sleep)")
	flag.IntVar(&c.reps4, "reps4", 3, "scenario 4: repetitions of each variant")
	flag.StringVar(&c.alt, "alt", "", "another conch binary (e.g. a patched build) measured beside bin/conch in scenarios 1, 2 and 4")
	flag.StringVar(&c.perf4, "perf4", "", "scenario 4: record each gated drain with `perf record -a -g` into this directory (analysis aid)")
	flag.IntVar(&c.waiters5, "waiters", 10000, "scenario 5: waiters on one semaphore (in-process sema clients); -quick: 1000")
	flag.IntVar(&c.max5, "max5", 10, "scenario 5: --max")
	flag.IntVar(&c.conns5, "conns5", 4, "scenario 5: clientv3 connections the waiters share (each waiter has its own lease and key)")
	flag.DurationVar(&c.ttl5, "ttl5", sema.DefaultTTL, "scenario 5: lease TTL")
	flag.DurationVar(&c.window5, "window5", 20*time.Second, "scenario 5: steady window for the keep-alive figures; -quick: 10s")
	flag.DurationVar(&c.hold5, "hold5", 2*time.Millisecond, "scenario 5: mean hold of a slot (uniform 0..2x), so holders release in random order")
	flag.IntVar(&c.lost5, "lost5", 5, "scenario 5: queued waiters whose lease is revoked during the drain (each must re-enter and be served)")
	flag.DurationVar(&c.drainTimeout5, "drain-timeout5", 15*time.Minute, "scenario 5: give up the drain after this")
	flag.IntVar(&c.reps6, "reps6", 30, "scenario 6: uncontended runs per variant")
	flag.IntVar(&c.rounds6, "rounds6", 6, "scenario 6: hand-off batches per variant")
	flag.IntVar(&c.batch6, "batch6", 10, "scenario 6: hand-offs per batch")
	flag.IntVar(&c.hold6, "hold6", 50, "scenario 6: ms each child of a batch holds the slot")
	flag.IntVar(&c.probes6, "probes6", 30, "scenario 6: step-by-step probes of a scope's creation")
	flag.BoolVar(&c.trace6, "trace6", false, "scenario 6: run conch with CONCH_TRACE=1 and report its trace points (-bin: a build with bench/trace/points.patch)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		c.reps1, c.rounds2, c.batch2, c.probes3, c.reps4 = 10, 3, 20, 1, 1
		c.reps6, c.rounds6, c.probes6 = 10, 3, 10
		if !set["waiters"] {
			c.waiters5 = 1000
		}
		if !set["window5"] {
			c.window5 = 10 * time.Second
		}
	}
	c.only = map[int]bool{}
	for _, s := range strings.Split(*only, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err == nil {
			c.only[n] = true
		}
	}
	for _, s := range strings.Split(*ws, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err == nil && n > 0 {
			c.ws3 = append(c.ws3, n)
		}
	}
	return c
}

// harness holds what every scenario needs.
type harness struct {
	cfg     config
	conch   string
	etcdctl string
	stamp   string
	etcd    *etcdServer
	cli     *clientv3.Client
	ps      *procs
	env     []string
	work    string
	ctx     context.Context
	cpu4    []drainCPU // scenario 4's CPU accounting, one per gated drain
	notes4  []string   // scenario 4's jobs that did not exit 0
}

func main() {
	os.Exit(run())
}

func run() int {
	cfg := parseConfig()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	h, err := newHarness(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer h.close()
	began := time.Now()
	rep := &report{cfg: cfg, began: began}
	rep.machine = describeMachine(h.conch, h.etcd)
	fmt.Fprintf(os.Stderr, "bench: etcd pid %d at %s (metrics %s); work dir %s\n", h.etcd.pid, h.etcd.endpoint, h.etcd.metrics, h.work)
	scenarios := []struct {
		n  int
		fn func() (*section, error)
	}{
		{1, h.scenario1}, {2, h.scenario2}, {3, h.scenario3}, {4, h.scenario4}, {5, h.scenario5}, {6, h.scenario6},
	}
	failed := false
	for _, s := range scenarios {
		if !cfg.only[s.n] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: scenario %d ...\n", s.n)
		sec, err := s.fn()
		h.ps.killAll() // nothing of a scenario outlives it
		if sec == nil {
			sec = &section{n: s.n}
		}
		sec.took = time.Since(t0)
		if err != nil {
			failed = true
			sec.err = err
			fmt.Fprintf(os.Stderr, "bench: scenario %d failed: %v\n", s.n, err)
		}
		fmt.Fprintf(os.Stderr, "bench: scenario %d took %v\n", s.n, sec.took.Round(time.Second))
		rep.sections = append(rep.sections, sec)
	}
	rep.took = time.Since(began)
	rep.loadAfter = loadAvg()
	fmt.Print(rep.table())
	if cfg.out != "" {
		if err := rep.write(cfg.out, cfg.analysis); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s (total %v)\n", cfg.out, rep.took.Round(time.Second))
	}
	if failed {
		return 1
	}
	return 0
}

func newHarness(ctx context.Context, cfg config) (*harness, error) {
	bin, err := filepath.Abs(cfg.binDir)
	if err != nil {
		return nil, err
	}
	h := &harness{
		cfg:     cfg,
		conch:   filepath.Join(bin, "conch"),
		etcdctl: filepath.Join(bin, "etcdctl"),
		stamp:   filepath.Join(bin, "bench-stamp"),
		ps:      newProcs(),
		ctx:     ctx,
	}
	for _, f := range []string{h.conch, h.etcdctl, h.stamp, filepath.Join(bin, "etcd")} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%v (run `make bench`, which builds it)", err)
		}
	}
	if h.work, err = os.MkdirTemp("", "conch-bench."); err != nil {
		return nil, err
	}
	if h.etcd, err = startEtcd(cfg.script, filepath.Join(bin, "etcd"), filepath.Join(h.work, "etcd")); err != nil {
		os.RemoveAll(h.work)
		return nil, err
	}
	if h.cli, err = h.etcd.client(); err != nil {
		h.close()
		return nil, err
	}
	// Only the connection settings, from nowhere but here (D9): no CONCH_* or
	// ETCDCTL_* of the caller's, no /etc/conch/conch.conf.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			h.env = append(h.env, kv)
		}
	}
	h.env = append(h.env, "CONCH_CONFIG=/dev/null", "CONCH_ENDPOINTS="+h.etcd.endpoint, "ETCDCTL_ENDPOINTS="+h.etcd.endpoint)
	return h, nil
}

func (h *harness) close() {
	h.ps.killAll()
	if h.cli != nil {
		h.cli.Close()
	}
	if h.etcd != nil {
		h.etcd.stop()
	}
	os.RemoveAll(h.work)
}

// conchArgv is `conch sema NAME --max N --scope never EXTRA... -- CHILD...`
// (direct mode: the machine's PID 1 is not systemd anyway).
func (h *harness) conchArgv(name string, max int, extra []string, child ...string) []string {
	return h.conchArgvBin(h.conch, name, max, extra, child...)
}

// conchArgvBin is conchArgv for another conch binary (-alt).
func (h *harness) conchArgvBin(bin, name string, max int, extra []string, child ...string) []string {
	a := []string{bin, "sema", name, "--max", fmt.Sprint(max), "--scope", "never"}
	a = append(a, extra...)
	return append(append(a, "--"), child...)
}

// etcdctlArgv is `etcdctl lock NAME CHILD...`.
func (h *harness) etcdctlArgv(name string, child ...string) []string {
	return append([]string{h.etcdctl, "lock", name}, child...)
}

func (h *harness) spawn(argv []string, o spawnOpts) (*proc, error) {
	if h.ctx.Err() != nil {
		return nil, h.ctx.Err()
	}
	o.env = h.env
	return h.ps.spawn(argv, o)
}

// runOne starts argv and waits for it (up to timeout).
func (h *harness) runOne(argv []string, timeout time.Duration) (*proc, error) {
	p, err := h.spawn(argv, spawnOpts{capture: true})
	if err != nil {
		return nil, err
	}
	if err := waitAll([]*proc{p}, timeout, -1); err != nil {
		return p, err
	}
	return p, nil
}

// countKeys counts the keys under prefix (one Range request, count only).
func (h *harness) countKeys(prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	resp, err := h.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// waitFor polls cond every interval until it is true or timeout passes.
func (h *harness) waitFor(what string, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		select {
		case <-h.ctx.Done():
			return h.ctx.Err()
		case <-time.After(interval):
		}
	}
}

// fifo makes a named pipe in the work dir; release ends a bench-stamp hold
// on it (open for writing, close: the reader sees EOF).
func (h *harness) fifo(name string) (string, error) {
	p := filepath.Join(h.work, name)
	_ = os.Remove(p)
	return p, syscall.Mkfifo(p, 0o600)
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
