package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
	"github.com/conch-project/conch/internal/metrics"
	"github.com/conch-project/conch/sema/schema"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// result3 is the cost of one queue of scenario 3.
type result3 struct {
	tool        string
	max, w      int
	acq         int      // acquisitions (= releases): gates + waiters
	life        etcdCost // whole life: enqueue, wait, hand-offs, releases (probes and harness polls removed)
	drain       etcdCost // from the gates' release to the last exit
	drainTime   time.Duration
	probes      []etcdCost
	probeOut    []float64 // bytes sent per probe, keep-alive answers removed
	reenter     int
	noisyProbes int     // probes dropped for watch traffic of others in their window
	bad         int     // processes that did not exit 0
	badWhy      string  // the first of them
	slowShare   float64 // share of 50 ms samples of the drain with unsynced watchers
	slowMax     float64
}

// scenario3: what a queue costs etcd, from the server's own counters.
// For each W, N gate holders (children blocked on FIFOs) hold every slot,
// W conch waiters (child `true`) queue behind them, P `--nonblock` probes
// enqueue at the back of the full queue (their server bytes are D2's O(N)
// ranking read, whatever W), then the gates are released and the queue
// drains. Counters are read from /metrics before and after each window; the
// harness's own polls are subtracted. Uncontended rows: sequential runs
// with nothing queued.
func (h *harness) scenario3() (*section, error) {
	sec := &section{n: 3, title: "Cost to etcd per acquisition and release (server /metrics)"}
	ka, err := h.keepAliveSample()
	if err != nil {
		return sec, err
	}
	runs := 10
	if h.cfg.quick {
		runs = 5
	}
	uc, err := h.uncontended3("u", runs, true)
	if err != nil {
		return sec, err
	}
	ul, err := h.uncontended3("ul", runs, false)
	if err != nil {
		return sec, err
	}
	var rs []*result3
	type q struct {
		conch bool
		max   int
	}
	qs := []q{{true, 1}, {true, 10}}
	if h.cfg.etcdctl3 {
		qs = append(qs, q{false, 1})
	}
	for _, qq := range qs {
		for _, w := range h.cfg.ws3 {
			r, err := h.queue3(qq.conch, qq.max, w, ka)
			if err != nil {
				return sec, fmt.Errorf("%s --max %d W=%d: %w", toolName(qq.conch), qq.max, w, err)
			}
			rs = append(rs, r)
			fmt.Fprintf(logOut, "bench:   %s --max %d W=%d: %.2f unary/acq, %.2f events/release, drain %v\n", r.tool, r.max, r.w, r.life.unaryTotal/float64(r.acq), r.drain.events/float64(r.acq), r.drainTime.Round(time.Millisecond))
		}
	}
	sec.rows = append(sec.rows, row{
		// 3 for the slot (grant, enqueue Txn, revoke: D2) and the name hint's one read beside them
		measure: fmt.Sprintf("unary requests per uncontended run: 3 for the slot, 1 name-hint read (%d runs)", runs),
		conch:   f2(uc.unaryTotal / float64(runs)), ref: f2(ul.unaryTotal / float64(runs)),
		ratio: f2(uc.unaryTotal / ul.unaryTotal), target: "<= 4", met: metStr(uc.unaryTotal/float64(runs) <= 4.0001),
	})
	ws := joinInts(h.cfg.ws3, "/")
	for _, mx := range []int{1, 10} {
		var c, l []*result3
		for _, r := range rs {
			if r.max == mx && r.tool == "conch" {
				c = append(c, r)
			}
			if r.max == mx && r.tool == "etcdctl" {
				l = append(l, r)
			}
		}
		if len(c) == 0 {
			continue
		}
		unary := func(rs []*result3) string {
			return joinF(rs, func(r *result3) float64 { return r.life.unaryTotal / float64(r.acq) })
		}
		events := func(rs []*result3) string {
			return joinF(rs, func(r *result3) float64 { return r.drain.events / float64(r.acq) })
		}
		maxEv := 0.0
		for _, r := range c {
			maxEv = max(maxEv, r.drain.events/float64(r.acq))
		}
		// flat: what the largest queue adds over the smallest is a few
		// bytes of longer varints (revisions, counts), not a key per waiter.
		// Only queues with a probe left after the noisy ones were dropped count.
		var probed []*result3
		for _, r := range c {
			if len(r.probeOut) > 0 {
				probed = append(probed, r)
			}
		}
		slope := math.NaN()
		if len(probed) > 1 {
			first, last := probed[0], probed[len(probed)-1]
			slope = (median(last.probeOut) - median(first.probeOut)) / float64(last.w-first.w)
		}
		// An enqueue that read the queue would add a key (~55 B keys-only)
		// per waiter; longer varints of a growing store revision add a few
		// bytes in all. So "flat" is: under 1 B per extra waiter.
		flatMet := "not measured (too few probes)"
		if !math.IsNaN(slope) {
			flatMet = metStr(slope < 1)
		}
		sec.rows = append(sec.rows,
			row{measure: fmt.Sprintf("unary requests per acquisition, --max %d, W=%s", mx, ws), conch: unary(c), ref: unary(l)},
			row{measure: fmt.Sprintf("watch events per release, --max %d, W=%s", mx, ws), conch: events(c), ref: events(l), target: "<= 3 each", met: metStr(maxEv <= 3)},
			row{measure: fmt.Sprintf("bytes sent per enqueue (probe), --max %d, W=%s", mx, ws), conch: joinF(c, func(r *result3) float64 { return median(r.probeOut) }), ratio: fmt.Sprintf("%+.2f B/waiter", slope), target: "flat in W (< 1 B/waiter)", met: flatMet},
		)
	}
	sec.detail = append(sec.detail, detail3(uc, ul, runs, rs))
	for _, r := range rs {
		if r.bad > 0 {
			sec.notes = append(sec.notes, fmt.Sprintf("%s --max %d W=%d: %d process(es) did not exit 0, e.g. %s", r.tool, r.max, r.w, r.bad, r.badWhy))
		}
		if r.reenter > 0 {
			sec.notes = append(sec.notes, fmt.Sprintf("%s --max %d W=%d: %d waiter(s) lost their place and re-entered", r.tool, r.max, r.w, r.reenter))
		}
	}
	return sec, nil
}

func toolName(conch bool) string {
	if conch {
		return "conch"
	}
	return "etcdctl"
}

// keepAlive is a real keep-alive answer of this server; kaSize sizes it
// with a current header, which the probes subtract for every keep-alive
// the server answered others during their window.
type keepAlive struct {
	id, ttl int64
}

func (h *harness) keepAliveSample() (keepAlive, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	g, err := h.cli.Grant(ctx, 10)
	if err != nil {
		return keepAlive{}, err
	}
	ka, err := h.cli.KeepAliveOnce(ctx, g.ID)
	if err != nil {
		return keepAlive{}, err
	}
	if _, err := h.cli.Revoke(ctx, g.ID); err != nil {
		return keepAlive{}, err
	}
	return keepAlive{int64(ka.ID), ka.TTL}, nil
}

// kaSize is the marshalled size of a keep-alive answer now: the header's
// revision grows as the store does (one Range request, counted in own).
func (h *harness) kaSize(ka keepAlive, own map[string]float64) (float64, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	own["Range"]++
	resp, err := h.cli.Get(ctx, "bench/revision")
	if err != nil {
		return 0, err
	}
	return float64(proto.Size(&pb.LeaseKeepAliveResponse{Header: resp.Header, ID: ka.id, TTL: ka.ttl})), nil
}

// uncontended3 runs `true` runs times in a row under conch or etcdctl,
// nothing else queued, and returns the server's counters for all of them.
func (h *harness) uncontended3(name string, runs int, conch bool) (etcdCost, error) {
	m0, err := h.etcd.scrape()
	if err != nil {
		return etcdCost{}, err
	}
	for range runs {
		argv := h.etcdctlArgv(name, "true")
		if conch {
			argv = h.conchArgv(name, 1, nil, "true")
		}
		p, err := h.runOne(argv, 30*time.Second)
		if err != nil {
			return etcdCost{}, err
		}
		if p.status != 0 {
			return etcdCost{}, fmt.Errorf("%s: exit %d: %s", p.name, p.status, p.stderrText())
		}
	}
	m1, err := h.etcd.scrape()
	if err != nil {
		return etcdCost{}, err
	}
	return costOf(metrics.Delta(m0, m1)), nil
}

// queue3 measures one queue: max gates, w waiters, probes, drain.
func (h *harness) queue3(conch bool, max, w int, ka keepAlive) (*result3, error) {
	r := &result3{tool: toolName(conch), max: max, w: w, acq: max + w}
	// fixed-length names: the name is in every key and range of the
	// enqueue, and a longer name for a larger W would show as W-dependence
	name := fmt.Sprintf("%s%02d-%04d", r.tool[:1], max, w)
	prefix := name + "/"
	if conch {
		prefix = schema.Prefix(name, max)
	}
	stamps := filepath.Join(h.work, "s3-"+name+".stamps")
	own := map[string]float64{}
	argv := func(extra []string, child ...string) []string {
		if conch {
			return h.conchArgv(name, max, extra, child...)
		}
		return h.etcdctlArgv(name, child...)
	}
	m0, err := h.etcd.scrape()
	if err != nil {
		return nil, err
	}
	var all, gates []*proc
	var fifos []string
	defer func() {
		for _, f := range fifos {
			_ = benchkit.ReleaseFIFO(f, 30*time.Second)
		}
	}()
	for i := range max {
		f, err := h.fifo(fmt.Sprintf("s3-%s-gate%d", name, i))
		if err != nil {
			return nil, err
		}
		fifos = append(fifos, f)
		p, err := h.spawn(argv(nil, h.stamp, stamps, "g", f), spawnOpts{capture: true})
		if err != nil {
			return nil, err
		}
		gates = append(gates, p)
	}
	if err := h.waitFor("gates hold", 60*time.Second, 5*time.Millisecond, func() (bool, error) {
		n, err := countStamps(stamps, 'S', "g")
		return n == max, err
	}); err != nil {
		return nil, err
	}
	var waiting, reenter atomic.Int64
	onLine := func(_ *proc, l string) {
		if strings.Contains(l, "waiting for") {
			waiting.Add(1)
		}
		if strings.Contains(l, "re-entering") {
			reenter.Add(1)
		}
	}
	for range w {
		p, err := h.spawn(argv(nil, "true"), spawnOpts{capture: true, onLine: onLine})
		if err != nil {
			return nil, err
		}
		all = append(all, p)
	}
	all = append(all, gates...)
	if err := h.waitFor("all queued", 180*time.Second, 10*time.Millisecond, func() (bool, error) {
		if conch {
			return waiting.Load() >= int64(w), nil
		}
		own["Range"]++
		n, err := h.countKeys(prefix)
		return n == int64(max+w), err
	}); err != nil {
		return nil, err
	}
	if _, err := h.quiesceWatches(); err != nil { // the waiters' watches are set up
		return nil, err
	}
	var probesTotal metrics.Samples
	if conch {
		// a probe whose window saw others' watch traffic (a head's progress request) is
		// dropped and tried again, up to 10 tries per probe kept
		for tries := 0; len(r.probes) < h.cfg.probes3 && tries < 10*h.cfg.probes3; tries++ {
			kaSize, err := h.kaSize(ka, own)
			if err != nil {
				return nil, err
			}
			a, err := h.quiesceWatches()
			if err != nil {
				return nil, err
			}
			p, err := h.runOne(argv([]string{"--nonblock"}, "true"), 30*time.Second)
			if err != nil {
				return nil, err
			}
			if p.status != 75 {
				return nil, fmt.Errorf("probe: exit %d, want 75: %s", p.status, p.stderrText())
			}
			b, err := h.etcd.scrape()
			if err != nil {
				return nil, err
			}
			d := metrics.Delta(a, b)
			c := costOf(d)
			probesTotal = addMetrics(probesTotal, d)
			if c.msgsIn["Watch"]+c.msgsOut["Watch"] > 0 {
				r.noisyProbes++ // watch traffic of others in the window: not counted
				continue
			}
			r.probes = append(r.probes, c)
			r.probeOut = append(r.probeOut, c.bytesOut-c.msgsOut["LeaseKeepAlive"]*kaSize)
		}
	}
	m2, err := h.etcd.scrape()
	if err != nil {
		return nil, err
	}
	slow := h.etcd.sampleGauge("etcd_debugging_mvcc_slow_watcher_total", 50*time.Millisecond)
	t0 := time.Now()
	for _, f := range fifos {
		if err := benchkit.ReleaseFIFO(f, 30*time.Second); err != nil {
			return nil, err
		}
	}
	fifos = nil
	if err := waitAll(all, 600*time.Second, -1); err != nil {
		return nil, err
	}
	r.drainTime = time.Since(t0)
	r.bad, r.badWhy = badExits(all, 0)
	r.slowShare, r.slowMax = slow.end()
	m3, err := h.etcd.scrape()
	if err != nil {
		return nil, err
	}
	life := metrics.Delta(m0, m3)
	if probesTotal != nil {
		life = metrics.Delta(probesTotal, life)
	}
	r.life = costOf(life).sub(own)
	r.drain = costOf(metrics.Delta(m2, m3))
	r.reenter = int(reenter.Load())
	return r, nil
}

func addMetrics(a, b metrics.Samples) metrics.Samples {
	out := metrics.Samples{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

func joinInts(xs []int, sep string) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, sep)
}

func joinF(rs []*result3, f func(*result3) float64) string {
	if len(rs) == 0 {
		return ""
	}
	var s []string
	for _, r := range rs {
		v := f(r)
		if v == float64(int64(v)) && v >= 100 {
			s = append(s, fmt.Sprint(int64(v)))
		} else {
			s = append(s, f2(v))
		}
	}
	return strings.Join(s, " / ")
}

// detail3 is the per-queue breakdown for the report.
func detail3(uc, ul etcdCost, runs int, rs []*result3) string {
	var b strings.Builder
	per := func(c etcdCost, n float64) string {
		return fmt.Sprintf("%s | %s | %s | %s | %s | %s | %s | %s | %s",
			f2(c.unary["LeaseGrant"]/n), f2(c.unary["Txn"]/n), f2(c.unary["Range"]/n), f2(c.unary["Put"]/n+c.unary["DeleteRange"]/n), f2(c.unary["LeaseRevoke"]/n),
			f2((c.streams["Watch"]+c.streams["LeaseKeepAlive"])/n), f2(c.msgsIn["Watch"]/n), f2(c.msgsIn["LeaseKeepAlive"]/n), f2(c.events/n))
	}
	fmt.Fprintf(&b, "Server-side counters per acquisition (one acquire + one release; a queue of W waiters behind N gate holders is N+W acquisitions; whole life: enqueue, wait, hand-off, release). \"watch reqs\" are messages received on Watch streams (creates and cancels); \"events\" are watch events sent.\n\n")
	b.WriteString("| run | LeaseGrant | Txn | Range | Put+Delete | LeaseRevoke | streams opened | watch reqs | keep-alives | events | bytes in | bytes out | drain (s) | unsynced watchers (share of samples, max) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| conch, uncontended (%d runs) | %s | %s | %s | | |\n", runs, per(uc, float64(runs)), f1(uc.bytesIn/float64(runs)), f1(uc.bytesOut/float64(runs)))
	fmt.Fprintf(&b, "| etcdctl lock, uncontended (%d runs) | %s | %s | %s | | |\n", runs, per(ul, float64(runs)), f1(ul.bytesIn/float64(runs)), f1(ul.bytesOut/float64(runs)))
	for _, r := range rs {
		n := float64(r.acq)
		fmt.Fprintf(&b, "| %s --max %d, W=%d | %s | %s | %s | %s | %.0f%%, %.0f |\n", r.tool, r.max, r.w, per(r.life, n), f1(r.life.bytesIn/n), f1(r.life.bytesOut/n), f2(r.drainTime.Seconds()), 100*r.slowShare, r.slowMax)
	}
	b.WriteString("\nEnqueue probes (`conch --nonblock` at the back of the full queue: LeaseGrant, the enqueue Txn, LeaseRevoke), median per probe; bytes out exclude the keep-alive answers the server sent other processes meanwhile:\n\n")
	b.WriteString("| queue | probes | unary requests | bytes in | bytes out | watch events |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		if len(r.probes) == 0 {
			continue
		}
		var u, bi, ev []float64
		for _, p := range r.probes {
			u = append(u, p.unaryTotal)
			bi = append(bi, p.bytesIn-p.msgsIn["LeaseKeepAlive"]*float64(keepAliveReqSize))
			ev = append(ev, p.events)
		}
		fmt.Fprintf(&b, "| --max %d, W=%d | %d (%d dropped: others' watch traffic in the window) | %s | %s | %s | %s |\n", r.max, r.w, len(r.probes), r.noisyProbes, f1(median(u)), f1(median(bi)), f1(median(r.probeOut)), f1(median(ev)))
	}
	return b.String()
}

// keepAliveReqSize is the marshalled size of a LeaseKeepAliveRequest with a
// 63-bit lease ID: tag + 9-byte varint.
const keepAliveReqSize = 10

// quiesceWatches waits (up to 5 s) until no Watch stream message was sent or
// received for 100 ms, and returns the last scrape.
func (h *harness) quiesceWatches() (metrics.Samples, error) {
	var last metrics.Samples
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := h.etcd.scrape()
		if err != nil {
			return nil, err
		}
		if last != nil {
			d := metrics.Delta(last, m)
			if d.Sum("grpc_server_msg_received_total", `grpc_method="Watch"`)+d.Sum("grpc_server_msg_sent_total", `grpc_method="Watch"`) == 0 || time.Now().After(deadline) {
				return m, nil
			}
		}
		last = m
		time.Sleep(100 * time.Millisecond)
	}
}
