package main

import (
	"fmt"
	"strings"

	"github.com/conch-project/conch/bench/internal/benchkit"
)

// report5 turns scenario 5's two queues into rows and a detail block.
func report5(sec *section, cfg config, a, b *variant5) {
	kaRate := func(v *variant5) float64 { return v.ka.msgsIn["LeaseKeepAlive"] / v.window.Seconds() }
	cpuRate := func(v *variant5) float64 { return v.cpuWindow.Seconds() / v.window.Seconds() }
	acq := float64(b.queued()+cfg.max5) + float64(b.lost) // releases in the drain (re-entries add a life each)
	events := b.drain.events / acq
	maxWait, served := 0.0, 0
	var waits []float64
	reenter := 0
	for _, x := range b.ws {
		if d := x.held.Load(); d > 0 {
			served++
			waits = append(waits, float64(d)/1e9)
			maxWait = max(maxWait, float64(d)/1e9)
		}
		reenter += int(x.reenter.Load())
	}
	lp50 := median(b.last)
	sec.rows = append(sec.rows,
		row{measure: fmt.Sprintf("keep-alive requests/s, W=%d / %d queued, TTL %v (B default / A every waiter at the holder cadence)", b.nWindow, a.nWindow, cfg.ttl5), conch: f1(kaRate(b)), ref: f1(kaRate(a)), ratio: f2(kaRate(b) / kaRate(a)), target: "reported"},
		row{measure: "keep-alive requests/s per waiter (B / A)", conch: fmt.Sprintf("%.3f", kaRate(b)/float64(b.nWindow)), ref: fmt.Sprintf("%.3f", kaRate(a)/float64(a.nWindow)), target: "reported"},
		row{measure: "etcd CPU while W wait (core-seconds per second, B / A)", conch: f2(cpuRate(b)), ref: f2(cpuRate(a)), ratio: f2(cpuRate(b) / cpuRate(a)), target: "reported"},
		row{measure: "etcd RSS while W wait (MiB, B / A)", conch: f1(float64(b.rssKB) / 1024), ref: f1(float64(a.rssKB) / 1024), target: "reported"},
		row{measure: "enqueue latency p50 (ms), last 100 (W~" + fmt.Sprint(cfg.waiters5) + ") / first 100 (W<100), queue B", conch: f2(lp50), ref: f2(median(b.first)), ratio: f2(lp50 / median(b.first)), target: "flat in W", met: metStr(lp50/median(b.first) <= 2)},
		row{measure: "unary requests per enqueue (last 100, server counters)", conch: f2(b.lastCost.unaryTotal / float64(len(b.last))), target: "2 (LeaseGrant + Txn)", met: metStr(b.lastCost.unaryTotal/float64(len(b.last)) <= 2.05)},
		row{measure: fmt.Sprintf("watch events per release, drain of %d through --max %d, random release order", len(b.ws), cfg.max5), conch: f2(events), target: "<= 3", met: metStr(events <= 3)},
		row{measure: "waiters served / max wait (s) / p50 wait (s)", conch: fmt.Sprintf("%d of %d / %.1f / %.1f", served, b.queued(), maxWait, median(waits)), target: "every waiter held", met: metStr(served == b.queued())},
	)
	for _, v := range []*variant5{a, b} {
		if v.refused != nil {
			sec.notes = append(sec.notes, fmt.Sprintf("%s: enqueueing stopped at %d of %d waiters: %s", v.label, v.nWindow, cfg.waiters5, oneLine(v.refused.Error())))
		}
	}
	sec.detail = append(sec.detail, detail5(cfg, a, b, acq, reenter))
}

func detail5(cfg config, a, b *variant5, acq float64, reenter int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d waiters (each its own sema.Semaphore, lease and key) on one etcd, sharing %d clientv3 connections; --max %d, TTL %v; %d gate holders first. Two queues in one run, differing only in the cadence of waiters behind the head (the head and holders always use min(TTL/6, 1 s), D7). Steady window of %v with every waiter queued, after one TTL of settling.\n\n",
		cfg.waiters5, cfg.conns5, cfg.max5, cfg.ttl5, cfg.max5, cfg.window5)
	s.WriteString("| queue | waiters queued | keep-alives in /s | per waiter /s | keep-alive bytes in+out /s | etcd CPU (s/s) | etcd VmRSS (MiB) | harness CPU (s/s) | enqueue p50 / p99 first 100 (ms) | enqueue p50 / p99 last 100 (ms) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, v := range []*variant5{a, b} {
		sec := v.window.Seconds()
		fmt.Fprintf(&s, "| %s | %d | %.0f | %.3f | %.0f | %.2f | %.1f | %.2f | %.2f / %.2f | %.2f / %.2f |\n", v.label, v.nWindow,
			v.ka.msgsIn["LeaseKeepAlive"]/sec, v.ka.msgsIn["LeaseKeepAlive"]/sec/float64(v.nWindow), (v.ka.bytesIn+v.ka.bytesOut)/sec,
			v.cpuWindow.Seconds()/sec, float64(v.rssKB)/1024, v.selfCPU.Seconds()/sec,
			median(v.first), benchkit.Pct(v.first, 99), median(v.last), benchkit.Pct(v.last, 99))
	}
	fmt.Fprintf(&s, "\nDrain of queue B: gates released in random order, each holder holds uniform 0..%v (so releases come in random order), %d queued waiters' leases revoked mid-drain (lost waiters).\n\n", 2*cfg.hold5, b.lost)
	s.WriteString("| drain (s) | releases/s | unary requests per release | watch events per release | watch messages in per release | etcd CPU per release (ms) | etcd VmHWM (MiB) | re-entries |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(&s, "| %.1f | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %d |\n", b.drainTime.Seconds(), acq/b.drainTime.Seconds(),
		b.drain.unaryTotal/acq, b.drain.events/acq, b.drain.msgsIn["Watch"]/acq, durMs(b.drainCPU)/acq, float64(b.hwmKB)/1024, reenter)
	fmt.Fprintf(&s, "\nLoad average when the scenario ended: %s.\n", loadAvg())
	return s.String()
}
