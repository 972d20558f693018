package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
	"github.com/conch-project/conch/sema/schema"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// variant2 is one tool of scenario 2.
type variant2 struct {
	label  string
	bin    string // conch binary; "" for etcdctl
	conch  bool
	max    int
	long   int // holders that keep max-1 slots for the whole scenario
	name   string
	prefix string
	stamps string

	handoffs                           []float64 // ms
	exitToRel, exitToHeld, heldToStart []float64
	overlaps                           int
	longProcs                          []*proc
	longFifos                          []string
}

// scenario2: hand-off latency. For each variant, batches of B waiters queue
// behind a gate holder whose child blocks on a FIFO; once all are queued the
// harness ends the gate's hold and the slot passes down the queue B times.
// Every child is bench-stamp: it stamps its first instruction, holds hold2,
// stamps its last. A hand-off is a waiter's first stamp minus the latest
// last-stamp before it in the same batch. Batches of the three variants are
// interleaved, and so are the floor measurements (etcd put, put to watch
// event on another connection, exec to first instruction of bench-stamp).
// --max 4 keeps 3 slots held by long holders, so the hand-offs go through
// the fourth slot and exercise the head-of-queue watch on 4 keys (D1).
func (h *harness) scenario2() (*section, error) {
	sec := &section{n: 2, title: "Hand-off latency: holder's child exits, next child starts"}
	vs := []*variant2{
		{label: "conch --max 1", conch: true, max: 1, name: "h1", bin: h.conch},
		{label: "etcdctl lock", name: "hl"},
		{label: "conch --max 4", conch: true, max: 4, long: 3, name: "h4", bin: h.conch},
	}
	if h.cfg.alt != "" {
		vs = append(vs, &variant2{label: "-alt --max 1", conch: true, max: 1, name: "ha", bin: h.cfg.alt})
	}
	for _, v := range vs {
		v.stamps = filepath.Join(h.work, "s2-"+v.name+".stamps")
		if v.conch {
			v.prefix = schema.Prefix(v.name, v.max)
		} else {
			v.prefix = v.name + "/"
		}
	}
	defer func() {
		for _, v := range vs {
			for _, f := range v.longFifos {
				_ = benchkit.ReleaseFIFO(f, 30*time.Second)
			}
			_ = waitAll(v.longProcs, 30*time.Second, -1)
		}
	}()
	for _, v := range vs {
		if err := h.startLongHolders(v); err != nil {
			return sec, err
		}
	}
	var fl floor
	defer func() {
		if fl.watcher != nil {
			fl.watcher.Close()
		}
	}()
	for r := range h.cfg.rounds2 {
		order := slices.Clone(vs)
		for i := 0; i < r%len(vs); i++ { // rotate who goes first
			order = append(order[1:], order[0])
		}
		for _, v := range order {
			if err := h.batch2(v, r); err != nil {
				return sec, fmt.Errorf("%s, batch %d: %w", v.label, r, err)
			}
		}
		if err := h.measureFloor(&fl, h.cfg.batch2); err != nil {
			return sec, err
		}
		fmt.Fprintf(os.Stderr, "bench:   round %d/%d done\n", r+1, h.cfg.rounds2)
	}
	c1, ref, c4 := vs[0], vs[1], vs[2]
	r50 := median(c1.handoffs) / median(ref.handoffs)
	sec.rows = append(sec.rows,
		row{measure: fmt.Sprintf("hand-off p50 (ms), --max 1, %d hand-offs", len(c1.handoffs)), conch: f2(median(c1.handoffs)), ref: f2(median(ref.handoffs)), ratio: f2(r50), target: "<= 0.6", met: metStr(r50 <= 0.6)},
		row{measure: "hand-off p99 (ms), --max 1", conch: f2(benchkit.Pct(c1.handoffs, 99)), ref: f2(benchkit.Pct(ref.handoffs, 99)), ratio: f2(benchkit.Pct(c1.handoffs, 99) / benchkit.Pct(ref.handoffs, 99))},
		row{measure: "hand-off p50 / p99 (ms), conch --max 4 (3 slots held)", conch: f2(median(c4.handoffs)) + " / " + f2(benchkit.Pct(c4.handoffs, 99)), ref: f2(median(ref.handoffs)) + " / " + f2(benchkit.Pct(ref.handoffs, 99)), ratio: f2(median(c4.handoffs) / median(ref.handoffs))},
		row{measure: "same run: etcd put p50 / p99 (ms)", ref: f2(median(fl.put)) + " / " + f2(benchkit.Pct(fl.put, 99))},
		row{measure: "same run: put to watch event p50 / p99 (ms)", ref: f2(median(fl.putWatch)) + " / " + f2(benchkit.Pct(fl.putWatch, 99))},
		row{measure: "same run: exec to child's first instruction p50 (ms)", ref: f2(median(fl.start))},
		row{measure: "floor: put-to-watch p50 + exec p50 (ms)", ref: f2(median(fl.putWatch) + median(fl.start))},
	)
	if len(vs) > 3 {
		a := vs[3]
		ra := median(a.handoffs) / median(ref.handoffs)
		sec.rows = append(sec.rows, row{measure: "-alt " + h.cfg.alt + ": hand-off p50 / p99 (ms), --max 1", conch: f2(median(a.handoffs)) + " / " + f2(benchkit.Pct(a.handoffs, 99)), ref: f2(median(ref.handoffs)) + " / " + f2(benchkit.Pct(ref.handoffs, 99)), ratio: f2(ra), target: "<= 0.6", met: metStr(ra <= 0.6)})
	}
	for _, v := range vs {
		if v.overlaps > 0 {
			sec.notes = append(sec.notes, fmt.Sprintf("%s: %d hand-off(s) where the next child started before the previous one ended: a mutual exclusion violation", v.label, v.overlaps))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Hand-off latency (ms), %d hand-offs per variant in batches of %d, each child holding %v:\n\n", len(c1.handoffs), h.cfg.batch2, h.cfg.hold2)
	b.WriteString("| variant | p50 | p90 | p99 | max |\n| --- | --- | --- | --- | --- |\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v.label, f2(median(v.handoffs)), f2(benchkit.Pct(v.handoffs, 90)), f2(benchkit.Pct(v.handoffs, 99)), f2(benchkit.Pct(v.handoffs, 100)))
	}
	fmt.Fprintf(&b, "| etcd put (reference) | %s | %s | %s | %s |\n", f2(median(fl.put)), f2(benchkit.Pct(fl.put, 90)), f2(benchkit.Pct(fl.put, 99)), f2(benchkit.Pct(fl.put, 100)))
	fmt.Fprintf(&b, "| put to watch event (reference) | %s | %s | %s | %s |\n", f2(median(fl.putWatch)), f2(benchkit.Pct(fl.putWatch, 90)), f2(benchkit.Pct(fl.putWatch, 99)), f2(benchkit.Pct(fl.putWatch, 100)))
	fmt.Fprintf(&b, "| exec to first instruction of bench-stamp (reference) | %s | %s | %s | %s |\n", f2(median(fl.start)), f2(benchkit.Pct(fl.start, 90)), f2(benchkit.Pct(fl.start, 99)), f2(benchkit.Pct(fl.start, 100)))
	b.WriteString("\nWhere a conch hand-off goes (p50, ms; from the harness's read times of the -v lines of the releasing and the promoted conch):\n\n")
	b.WriteString("| variant | child exit to \"released\" (guardian teardown, LeaseRevoke answered) | child exit to next \"slot held\" (revoke commit, watch event, promote Txn) | \"slot held\" to next child's first instruction (guardian start, exec) |\n| --- | --- | --- | --- |\n")
	for _, v := range vs {
		if !v.conch {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.label, f2(median(v.exitToRel)), f2(median(v.exitToHeld)), f2(median(v.heldToStart)))
	}
	sec.detail = append(sec.detail, b.String())
	return sec, nil
}

// startLongHolders starts v.long holders whose children block on FIFOs.
func (h *harness) startLongHolders(v *variant2) error {
	for i := range v.long {
		f, err := h.fifo(fmt.Sprintf("s2-%s-long%d", v.name, i))
		if err != nil {
			return err
		}
		v.longFifos = append(v.longFifos, f)
		p, err := h.spawn(h.conchArgvBin(v.bin, v.name, v.max, []string{"-v"}, h.stamp, v.stamps, "L", f), spawnOpts{capture: true})
		if err != nil {
			return err
		}
		v.longProcs = append(v.longProcs, p)
		if err := h.waitFor("long holders started", 30*time.Second, 5*time.Millisecond, func() (bool, error) {
			n, err := countStamps(v.stamps, 'S', "L")
			return n == i+1, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// batch2 runs one batch of v: gate, B waiters, release, wait, hand-offs.
func (h *harness) batch2(v *variant2, round int) error {
	B := h.cfg.batch2
	hold := fmt.Sprint(h.cfg.hold2.Milliseconds())
	argv := func(tag, holdArg string) []string {
		child := []string{h.stamp, v.stamps, tag, holdArg}
		if v.conch {
			return h.conchArgvBin(v.bin, v.name, v.max, []string{"-v"}, child...)
		}
		return h.etcdctlArgv(v.name, child...)
	}
	gf, err := h.fifo(fmt.Sprintf("s2-%s-gate%d", v.name, round))
	if err != nil {
		return err
	}
	gtag := fmt.Sprintf("b%d-g", round)
	gate, err := h.spawn(argv(gtag, gf), spawnOpts{capture: true})
	if err != nil {
		return err
	}
	all := []*proc{gate}
	byTag := map[string]*proc{gtag: gate}
	if err := h.waitFor("gate holds", 30*time.Second, 2*time.Millisecond, func() (bool, error) {
		n, err := countStamps(v.stamps, 'S', gtag)
		return n == 1, err
	}); err != nil {
		return err
	}
	for i := range B {
		tag := fmt.Sprintf("b%d-w%d", round, i)
		p, err := h.spawn(argv(tag, hold), spawnOpts{capture: true})
		if err != nil {
			return err
		}
		all = append(all, p)
		byTag[tag] = p
	}
	want := int64(v.long + 1 + B)
	if err := h.waitFor("all queued", 60*time.Second, 5*time.Millisecond, func() (bool, error) {
		n, err := h.countKeys(v.prefix)
		return n == want, err
	}); err != nil {
		return err
	}
	// every waiter watching, none unsynced (the server's gauges): conch waiters watch their
	// predecessor (or the holders) and their own key, etcdctl lock waiters one key
	watches := float64(B)
	if v.conch {
		watches = float64(2 * B)
	}
	if err := h.waitFor("all watching", 60*time.Second, 5*time.Millisecond, func() (bool, error) {
		m, err := h.etcd.scrape()
		return err == nil && m.Sum("etcd_debugging_mvcc_watcher_total") >= watches &&
			m.Sum("etcd_debugging_mvcc_slow_watcher_total") == 0, err
	}); err != nil {
		return err
	}
	if err := benchkit.ReleaseFIFO(gf, 30*time.Second); err != nil {
		return err
	}
	if err := waitAll(all, 120*time.Second, 0); err != nil {
		return err
	}
	evs, err := readStamps(v.stamps)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("b%d-", round)
	var batch []stampEv
	for _, e := range evs {
		if strings.HasPrefix(e.tag, prefix) {
			batch = append(batch, e)
		}
	}
	slices.SortFunc(batch, func(a, b stampEv) int { return int(a.t - b.t) })
	var lastE *stampEv
	held := 0
	for i := range batch {
		e := &batch[i]
		if e.kind == 'E' {
			lastE = e
			held--
			continue
		}
		held++
		if held > 1 {
			v.overlaps++
		}
		if e.tag == gtag {
			continue
		}
		if lastE == nil {
			return fmt.Errorf("%s started before any child of its batch ended", e.tag)
		}
		v.handoffs = append(v.handoffs, ms(e.t-lastE.t))
		if v.conch {
			prev, next := byTag[lastE.tag], byTag[e.tag]
			tr, ok1 := prev.lineTime("released")
			th, ok2 := next.lineTime("slot held")
			if ok1 && ok2 {
				v.exitToRel = append(v.exitToRel, ms(tr-lastE.t))
				v.exitToHeld = append(v.exitToHeld, ms(th-lastE.t))
				v.heldToStart = append(v.heldToStart, ms(e.t-th))
			}
		}
	}
	return nil
}

// floor holds the reference latencies of scenario 2 (ms).
type floor struct {
	put, putWatch, start []float64
	watcher              *clientv3.Client
	execs                int
}

// measureFloor takes n samples of each reference: a Put on the harness's
// connection; a Put until the event arrives on a watch of another
// connection (one commit plus one watch delivery); exec of bench-stamp to
// its first instruction.
func (h *harness) measureFloor(fl *floor, n int) error {
	ctx, cancel := context.WithTimeout(h.ctx, 60*time.Second)
	defer cancel()
	if fl.watcher == nil {
		c, err := h.etcd.client()
		if err != nil {
			return err
		}
		fl.watcher = c
	}
	for i := range n {
		t0 := benchkit.Mono()
		if _, err := h.cli.Put(ctx, "bench/put", fmt.Sprint(i)); err != nil {
			return err
		}
		fl.put = append(fl.put, ms(benchkit.Mono()-t0))
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	resp, err := h.cli.Get(ctx, "bench/pw")
	if err != nil {
		return err
	}
	wch := fl.watcher.Watch(wctx, "bench/pw", clientv3.WithRev(resp.Header.Revision+1), clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created { // the watch exists before the first put is timed
		return fmt.Errorf("watch of bench/pw not created: %v", wr.Err())
	}
	for i := range n {
		t0 := benchkit.Mono()
		if _, err := h.cli.Put(ctx, "bench/pw", fmt.Sprint(i)); err != nil {
			return err
		}
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || len(wr.Events) == 0 {
				return fmt.Errorf("watch of bench/pw failed: %v", wr.Err())
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		fl.putWatch = append(fl.putWatch, ms(benchkit.Mono()-t0))
	}
	file := filepath.Join(h.work, "s2-exec.stamps")
	for range n {
		tag := fmt.Sprintf("x%d", fl.execs)
		fl.execs++
		p, err := h.runOne([]string{h.stamp, file, tag}, 10*time.Second)
		if err != nil {
			return err
		}
		evs, err := readStamps(file)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.tag == tag && e.kind == 'S' {
				fl.start = append(fl.start, ms(e.t-p.start))
			}
		}
	}
	return nil
}
