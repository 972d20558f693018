package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
)

// scenario4: drain. W jobs of `sleep 0.05` through --max N.
//
// Gated: N gate holders (children blocked on FIFOs) take every slot, the W
// jobs are started at once and queue; once all W are enqueued (each printed
// its "waiting for" line, and `--who --json` is checked to show W waiters)
// the gates are released: wall time from there to the last conch's exit,
// against the ideal W/N x job. While they all wait, the harness reads
// VmHWM of each waiting conch and of any child it has (a guardian, if one
// existed while waiting).
//
// Ungated: the W jobs are started at once on a free semaphore: wall time from
// the first fork to the last exit, which includes W process starts on the
// machine's cores.
func (h *harness) scenario4() (*section, error) {
	sec := &section{n: 4, title: fmt.Sprintf("Drain: %d jobs of `sleep %g` through --max %d", h.cfg.jobs4, h.cfg.job4.Seconds(), h.cfg.max4)}
	W, N := h.cfg.jobs4, h.cfg.max4
	ideal := time.Duration(float64(W) / float64(N) * float64(h.cfg.job4))
	var gated, ungated, hwm, rss, kids, alt []float64
	for i := range h.cfg.reps4 {
		d, hw, rs, nk, err := h.drainGated(fmt.Sprintf("d%d", i), h.conch)
		if err != nil {
			return sec, fmt.Errorf("gated drain %d: %w", i, err)
		}
		gated = append(gated, d.Seconds())
		hwm, rss = append(hwm, hw...), append(rss, rs...)
		kids = append(kids, float64(nk))
		u, err := h.drainUngated(fmt.Sprintf("u%d", i))
		if err != nil {
			return sec, fmt.Errorf("ungated drain %d: %w", i, err)
		}
		ungated = append(ungated, u.Seconds())
		if h.cfg.alt != "" {
			a, _, _, _, err := h.drainGated(fmt.Sprintf("a%d", i), h.cfg.alt)
			if err != nil {
				return sec, fmt.Errorf("gated drain %d with -alt: %w", i, err)
			}
			alt = append(alt, a.Seconds())
		}
		fmt.Fprintf(logOut, "bench:   drain %d: %.2fs from all enqueued, %.2fs from first start\n", i+1, d.Seconds(), u.Seconds())
	}
	rg := median(gated) / ideal.Seconds()
	ru := median(ungated) / ideal.Seconds()
	sec.rows = append(sec.rows,
		row{measure: fmt.Sprintf("drain from all enqueued (s), %d runs; ideal %.2f s", len(gated), ideal.Seconds()), conch: f2(median(gated)), ref: f2(ideal.Seconds()), ratio: f2(rg), target: "<= 1.3", met: metStr(rg <= 1.3)},
		row{measure: "drain from the first start (s), 300 process starts included", conch: f2(median(ungated)), ref: f2(ideal.Seconds()), ratio: f2(ru)},
		row{measure: fmt.Sprintf("RSS of one waiting conch + guardian (MiB, VmHWM p50 / max of %d)", len(hwm)), conch: f1(median(hwm)) + " / " + f1(benchkit.Pct(hwm, 100)), target: "<= 20", met: metStr(benchkit.Pct(hwm, 100) <= 20)},
		row{measure: fmt.Sprintf("private memory (USS) of one waiting conch + guardian (MiB, p50 / max of %d): what one more waiter costs", len(rss)), conch: f1(median(rss)) + " / " + f1(benchkit.Pct(rss, 100))},
	)
	if len(alt) > 0 {
		ra := median(alt) / ideal.Seconds()
		sec.rows = append(sec.rows, row{measure: "-alt " + h.cfg.alt + ": drain from all enqueued (s)", conch: f2(median(alt)), ref: f2(ideal.Seconds()), ratio: f2(ra), target: "<= 1.3", met: metStr(ra <= 1.3)})
	}
	var busy, conchMs, etcdMs, slowShare, slowMax []float64
	for _, c := range h.cpu4 {
		slowShare = append(slowShare, 100*c.slowShare)
		slowMax = append(slowMax, c.slowMax)
		busy = append(busy, 100*c.busy.Seconds()/c.total.Seconds())
		conchMs = append(conchMs, durMs(c.conch)/float64(W))
		etcdMs = append(etcdMs, durMs(c.etcd)/float64(W))
	}
	sec.detail = append(sec.detail, fmt.Sprintf(`While the gated drain ran, the machine's CPUs were %s%% busy (all processes, p50 of the runs); per job, the waiting conch's tree (conch after it was woken, its guardian, sleep) used %s ms of CPU and etcd %s ms (from /proc/PID/stat and wait4, 10 ms ticks summed over %d jobs).

Unsynced watchers during the gated drain (etcd_debugging_mvcc_slow_watcher_total sampled every 50 ms): present in %s%% of samples, up to %s at once (p50 of the runs). A watch created at a revision the store has already passed waits for etcd's resync loop (every 100 ms) before it sees any event.

`, f1(median(busy)), f1(median(conchMs)), f2(median(etcdMs)), W, f1(median(slowShare)), f1(median(slowMax))))
	sec.notes = append(sec.notes, h.notes4...)
	sec.detail = append(sec.detail, fmt.Sprintf(`Per hand-off overhead in the gated drain: (drain - ideal) / (W/N) = %s ms per slot turn (p50 drain %s s over %d turns of %v).

A waiting conch: VmHWM p50 %s MiB, max %s MiB; private memory (USS) p50 %s MiB (its guardian included); guardians among the waiting conch processes: %s per run (p50): only the waiter next in line starts its guardian ahead of the hand-off, which is why the VmHWM maximum exceeds 20 MiB (the guardian maps the same conch binary, so adding its RSS counts those pages a second time; its own private memory is a few MiB).
`, f1((median(gated)-ideal.Seconds())*1000/(float64(W)/float64(N))), f2(median(gated)), W/N, h.cfg.job4,
		f1(median(hwm)), f1(benchkit.Pct(hwm, 100)), f1(median(rss)), f1(median(kids))))
	return sec, nil
}

// drainCPU is where the CPU went during a gated drain.
type drainCPU struct {
	busy, total time.Duration // the machine's, all cores, from /proc/stat
	conch       time.Duration // the waiters' trees: conch, guardian, sleep
	etcd        time.Duration
	slowShare   float64 // share of 50 ms samples with unsynced watchers
	slowMax     float64 // most unsynced watchers seen at once
}

// drainGated returns the drain time and, per waiting conch, VmHWM and VmRSS
// (MiB, its children's included) and how many children the waiters had.
// The CPU accounting goes to h.cpu4.
func (h *harness) drainGated(name, bin string) (time.Duration, []float64, []float64, int, error) {
	W, N := h.cfg.jobs4, h.cfg.max4
	stamps := filepath.Join(h.work, "s4-"+name+".stamps")
	var fifos []string
	defer func() {
		for _, f := range fifos {
			_ = benchkit.ReleaseFIFO(f, 30*time.Second)
		}
	}()
	var all []*proc
	for i := range N {
		f, err := h.fifo(fmt.Sprintf("s4-%s-gate%d", name, i))
		if err != nil {
			return 0, nil, nil, 0, err
		}
		fifos = append(fifos, f)
		p, err := h.spawn(h.conchArgvBin(bin, name, N, nil, h.stamp, stamps, "g", f), spawnOpts{capture: true})
		if err != nil {
			return 0, nil, nil, 0, err
		}
		all = append(all, p)
	}
	if err := h.waitFor("gates hold", 60*time.Second, 5*time.Millisecond, func() (bool, error) {
		n, err := countStamps(stamps, 'S', "g")
		return n == N, err
	}); err != nil {
		return 0, nil, nil, 0, err
	}
	var waiting atomic.Int64
	onLine := func(_ *proc, l string) {
		if strings.Contains(l, "waiting for") {
			waiting.Add(1)
		}
	}
	var waiters []*proc
	for range W {
		p, err := h.spawn(h.conchArgvBin(bin, name, N, nil, "sleep", fmt.Sprint(h.cfg.job4.Seconds())), spawnOpts{capture: true, onLine: onLine})
		if err != nil {
			return 0, nil, nil, 0, err
		}
		waiters = append(waiters, p)
	}
	all = append(all, waiters...)
	if err := h.waitFor("all enqueued", 180*time.Second, 5*time.Millisecond, func() (bool, error) {
		return waiting.Load() >= int64(W), nil
	}); err != nil {
		return 0, nil, nil, 0, err
	}
	if err := h.checkWho(bin, name, N, N, W); err != nil {
		return 0, nil, nil, 0, err
	}
	var hwm, rss []float64
	nkids := 0
	for _, p := range waiters {
		hw, err1 := procStatusKB(p.pid(), "VmHWM")
		rs, err2 := procUssKB(p.pid())
		if err1 != nil || err2 != nil {
			continue
		}
		for _, c := range childrenOf(p.pid()) {
			nkids++
			if k, err := procStatusKB(c, "VmHWM"); err == nil {
				hw += k
			}
			if k, err := procUssKB(c); err == nil {
				rs += k
			}
		}
		hwm = append(hwm, float64(hw)/1024)
		rss = append(rss, float64(rs)/1024)
	}
	before := map[int]time.Duration{}
	for _, p := range waiters {
		if c, err := procCPU(p.pid()); err == nil {
			before[p.pid()] = c
		}
	}
	etcd0, _ := procCPU(h.etcd.pid)
	stopPerf := h.startPerf(name)
	defer stopPerf()
	busy0, total0 := cpuTimes()
	slow := h.etcd.sampleGauge("etcd_debugging_mvcc_slow_watcher_total", 50*time.Millisecond)
	t0 := benchkit.Mono()
	for _, f := range fifos {
		if err := benchkit.ReleaseFIFO(f, 30*time.Second); err != nil {
			return 0, nil, nil, 0, err
		}
	}
	fifos = nil
	if err := waitAll(all, 300*time.Second, -1); err != nil {
		return 0, nil, nil, 0, err
	}
	h.noteBadExits(fmt.Sprintf("gated drain %s", name), all)
	busy1, total1 := cpuTimes()
	dcShare, dcMax := slow.end()
	stopPerf()
	etcd1, _ := procCPU(h.etcd.pid)
	var last int64
	dc := drainCPU{busy: busy1 - busy0, total: total1 - total0, etcd: etcd1 - etcd0, slowShare: dcShare, slowMax: dcMax}
	for _, p := range waiters {
		last = max(last, p.end)
		dc.conch += p.cpu() - before[p.pid()]
	}
	if bin == h.conch {
		h.cpu4 = append(h.cpu4, dc)
	}
	return time.Duration(last - t0), hwm, rss, nkids, nil
}

// checkWho runs `conch sema NAME --max N --who --json` and checks it shows
// held holders and waiting waiters (D6: state derived from rank).
func (h *harness) checkWho(bin, name string, max, held, waiting int) error {
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "sema", name, "--max", fmt.Sprint(max), "--who", "--json")
	cmd.Env = h.env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("conch --who --json: %w", err)
	}
	hd, wt, err := parseWho(out)
	if err != nil {
		return fmt.Errorf("conch --who --json: %w: %q", err, out)
	}
	if hd != held || wt != waiting {
		return fmt.Errorf("conch --who --json shows %d held and %d waiting, want %d and %d", hd, wt, held, waiting)
	}
	return nil
}

// drainUngated starts W jobs at once on a free semaphore and returns the
// time from the first fork to the last exit.
func (h *harness) drainUngated(name string) (time.Duration, error) {
	W, N := h.cfg.jobs4, h.cfg.max4
	var all []*proc
	for range W {
		p, err := h.spawn(h.conchArgv(name, N, nil, "sleep", fmt.Sprint(h.cfg.job4.Seconds())), spawnOpts{capture: true})
		if err != nil {
			return 0, err
		}
		all = append(all, p)
	}
	if err := waitAll(all, 300*time.Second, -1); err != nil {
		return 0, err
	}
	h.noteBadExits(fmt.Sprintf("ungated drain %s", name), all)
	first, last := all[0].start, int64(0)
	for _, p := range all {
		first, last = min(first, p.start), max(last, p.end)
	}
	return time.Duration(last - first), nil
}

// whoEntry is the part of `--who --json` the harness checks.
type whoEntry struct {
	State string `json:"state"`
}

func parseWho(b []byte) (held, waiting int, err error) {
	var es []whoEntry
	if err := json.Unmarshal(b, &es); err != nil {
		return 0, 0, err
	}
	for _, e := range es {
		switch e.State {
		case "HELD":
			held++
		case "WAIT":
			waiting++
		}
	}
	return held, waiting, nil
}

// startPerf starts `perf record -a -g` into DIR/perf-NAME.data when -perf4
// DIR is set (for finding where a drain's CPU goes); the returned function
// stops it (SIGINT, by PID) and waits, and is safe to call twice.
func (h *harness) startPerf(name string) func() {
	if h.cfg.perf4 == "" {
		return func() {}
	}
	out := filepath.Join(h.cfg.perf4, "perf-"+name+".data")
	cmd := exec.Command("perf", "record", "-a", "-g", "-F", "499", "-o", out)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logOut, "bench: perf: %v\n", err)
		return func() {}
	}
	time.Sleep(300 * time.Millisecond) // perf's own start-up
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		fmt.Fprintf(logOut, "bench: perf data in %s\n", out)
	}
}

// noteBadExits records, for the report, jobs of a drain that did not exit 0.
func (h *harness) noteBadExits(what string, list []*proc) {
	if n, first := badExits(list, 0); n > 0 {
		note := fmt.Sprintf("%s: %d of %d conch processes did not exit 0, e.g. %s", what, n, len(list), first)
		h.notes4 = append(h.notes4, note)
		fmt.Fprintf(logOut, "bench:   %s\n", note)
	}
}
