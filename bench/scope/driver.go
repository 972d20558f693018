// Package scopebench is scenario 6 of bench (bin/bench): conch where operators run it, in
// scope mode inside a systemd node, against `etcdctl lock` with and without
// `systemd-run --scope`, in one run.
//
// It has two halves in one test binary (bin/bench-scope, built by `make bench`):
// BenchmarkScopeScenario runs on the host, boots a node as the integration tests do
// (internal/systemdtest, the binaries bind-mounted at /opt/bin) and starts this same binary
// inside it as a transient service; there TestMain sees BENCH_SCOPE_DRIVER and runs Drive,
// which starts every variant as a child of that service (as a unit's ExecStart would) and
// prints the results as JSON on stdout.
package scopebench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is what Drive is told by the host half (JSON in BENCH_SCOPE_DRIVER).
type Config struct {
	Bin      string `json:"bin"`      // directory with conch, conch-guardian, etcdctl, bench-stamp
	Endpoint string `json:"endpoint"` // etcd, host:port
	Work     string `json:"work"`     // a writable directory in the node
	Reps     int    `json:"reps"`     // uncontended runs per variant
	Rounds   int    `json:"rounds"`   // hand-off batches per variant
	Batch    int    `json:"batch"`    // hand-offs per batch
	HoldMs   int    `json:"hold_ms"`  // how long each child of a batch holds
	Probes   int    `json:"probes"`   // D-Bus probes of a scope's creation
	// Trace sets CONCH_TRACE=1 for conch: a build with bench/trace/points.patch applied then
	// writes trace points ("T PID NS NAME") on stderr, which Drive reports for the uncontended
	// scope-mode runs.
	Trace bool `json:"trace,omitempty"`
	// Alt is the directory, in the node, of another conch build (with its conch-guardian)
	// measured beside Bin's in scope mode and with --scope never (an A/B of a patch); "" for
	// none.
	Alt string `json:"alt,omitempty"`
}

// Output is what Drive prints: one row per measure (measure, variant value, reference value,
// ratio, target, met) and markdown detail.
type Output struct {
	Rows   [][6]string `json:"rows"`
	Detail string      `json:"detail"`
	Notes  []string    `json:"notes,omitempty"`
}

// variant is one tool of the scenario.
type variant struct {
	label    string
	conch    bool
	scope    bool   // the child runs in a scope (conch scope mode, systemd-run --scope)
	key      string // short name for the semaphore / lock name
	bin      string // conch's directory; "" for Config.Bin
	handoffs []float64
	wall     []float64
	// conch -v lines (uncontended): exec to "slot held", "slot held" to the child's first
	// instruction, "released" to exit.
	toHeld, heldToChild, relToExit []float64
	overlaps                       int
	trace                          map[string][]float64 // trace point: ms from exec, per run
	htrace                         map[string][]float64 // trace point: ms from the previous child's end, per hand-off
}

// driver holds one Drive's state.
type driver struct {
	cfg Config
	cli *clientv3.Client
	env []string
	ctx context.Context
	seq int
}

// Drive runs the scenario inside the node and writes Output as JSON on w.
func Drive(ctx context.Context, cfg Config, w io.Writer) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	d := &driver{cfg: cfg, cli: cli, ctx: ctx}
	for _, kv := range os.Environ() { // only the connection settings from here (D9)
		if !strings.HasPrefix(kv, "CONCH_") && !strings.HasPrefix(kv, "ETCDCTL_") && !strings.HasPrefix(kv, "JOURNAL_STREAM=") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			d.env = append(d.env, kv)
		}
	}
	d.env = append(d.env, "CONCH_CONFIG=/dev/null", "CONCH_ENDPOINTS="+cfg.Endpoint, "ETCDCTL_ENDPOINTS="+cfg.Endpoint)
	if cfg.Trace {
		d.env = append(d.env, "CONCH_TRACE=1")
	}
	vs := []*variant{
		{label: "conch, scope mode", conch: true, scope: true, key: "cs"},
		{label: "conch --scope never", conch: true, key: "cd"},
		{label: "etcdctl lock", key: "el"},
		{label: "etcdctl lock -- systemd-run --scope", scope: true, key: "es"},
	}
	if cfg.Alt != "" {
		vs = append(vs,
			&variant{label: "-alt: conch, scope mode", conch: true, scope: true, key: "as", bin: cfg.Alt},
			&variant{label: "-alt: conch --scope never", conch: true, key: "ad", bin: cfg.Alt})
	}
	if err := d.uncontended(vs); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}
	for r := range cfg.Rounds {
		for i := range vs {
			v := vs[(i+r)%len(vs)]
			if err := d.batch(v, r); err != nil {
				return fmt.Errorf("%s, batch %d: %w", v.label, r, err)
			}
		}
		fmt.Fprintf(os.Stderr, "bench-scope: round %d/%d\n", r+1, cfg.Rounds)
	}
	probe, err := d.probeScopes()
	if err != nil {
		return fmt.Errorf("scope probe: %w", err)
	}
	return json.NewEncoder(w).Encode(d.output(vs, probe))
}

// argv is variant v's command line for lock name, its child being bench-stamp FILE TAG HOLD.
func (d *driver) argv(v *variant, name string, child ...string) []string {
	stamp := append([]string{filepath.Join(d.cfg.Bin, "bench-stamp")}, child...)
	conch := filepath.Join(cmp.Or(v.bin, d.cfg.Bin), "conch")
	switch {
	case v.conch && v.scope:
		return append([]string{conch, "sema", name, "--max", "1", "-v", "--"}, stamp...)
	case v.conch:
		return append([]string{conch, "sema", name, "--max", "1", "-v", "--scope", "never", "--"}, stamp...)
	case v.scope:
		return append([]string{filepath.Join(d.cfg.Bin, "etcdctl"), "lock", name, "--", "systemd-run", "--scope", "--quiet", "--collect"}, stamp...)
	}
	return append([]string{filepath.Join(d.cfg.Bin, "etcdctl"), "lock", name}, stamp...)
}

// prefix is where variant v's keys for lock name live: conch's under the spec's
// /conch/v1/sema/<name>/ (this package drives conch and unitrun, and only cmd/conch may link
// both sema and unitrun), etcdctl's under <name>/.
func prefix(v *variant, name string) string {
	if v.conch {
		return "/conch/v1/sema/" + name + "/"
	}
	return name + "/"
}

// name is a fresh lock name for v.
func (d *driver) name(v *variant) string {
	d.seq++
	return fmt.Sprintf("b6%s%d-%d", v.key, d.seq, os.Getpid())
}

// proc is one started tool with its stderr lines and their read times.
type proc struct {
	cmd        *exec.Cmd
	start, end int64
	lines      benchkit.Lines
	read       chan struct{}
}

func (d *driver) spawn(argv []string) (*proc, error) {
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), read: make(chan struct{})}
	p.cmd.Env = d.env
	p.cmd.Dir = d.cfg.Work
	errR, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p.start = benchkit.Mono()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			p.lines.Add(benchkit.Mono(), sc.Text())
		}
	}()
	return p, nil
}

// wait waits for p and its stderr; an exit other than 0 is an error with its stderr.
func (p *proc) wait() error {
	<-p.read
	err := p.cmd.Wait()
	p.end = benchkit.Mono()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", p.cmd.Args[0], err, p.stderr())
	}
	return nil
}

func (p *proc) stderr() string { return p.lines.Text() }

// lineTime is the read time of the first stderr line containing s.
func (p *proc) lineTime(s string) (int64, bool) { return p.lines.First(s) }

// traces adds the first time of each trace point in p's stderr, in ms from p's exec, to m.
func (p *proc) traces(m map[string][]float64) { p.tracesSince(p.start, m) }

// tracesSince adds the first time at or after t0 of each trace point in p's stderr, in ms from
// t0, to m.
func (p *proc) tracesSince(t0 int64, m map[string][]float64) {
	seen := map[string]bool{}
	for _, l := range p.lines.All() {
		f := strings.Fields(l.Text)
		if len(f) != 4 || f[0] != "T" || seen[f[3]] {
			continue
		}
		if t, err := strconv.ParseInt(f[2], 10, 64); err == nil && t >= t0 {
			seen[f[3]] = true
			m[f[3]] = append(m[f[3]], ms(t-t0))
		}
	}
}

// stampEvent is one line of a bench-stamp file.
type stampEvent struct {
	kind, tag string
	t         int64
}

func readStamps(file string) ([]stampEvent, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var ev []stampEvent
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		t, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, err
		}
		ev = append(ev, stampEvent{kind: f[0], tag: f[1], t: t})
	}
	slices.SortFunc(ev, func(a, b stampEvent) int { return int(a.t - b.t) })
	return ev, nil
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
