package main

import (
	"fmt"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
)

// scenario1: uncontended. `conch sema b --max 1 -- true` against
// `etcdctl lock b true`, alternating which goes first, after two warm-up
// runs each: whole-process wall time (fork/exec to wait4), wait4's peak RSS
// (the largest process of the tree: conch, its guardian or the child) and
// CPU time (user+system of the whole tree). conch runs with -v so the
// harness can split its time at the "enqueued", "slot held" and "released"
// lines (three short stderr writes).
func (h *harness) scenario1() (*section, error) {
	sec := &section{n: 1, title: "Uncontended acquire, run `true`, release"}
	const warm = 2
	argv := [][]string{
		h.conchArgv("b", 1, []string{"-v"}, "true"),
		h.etcdctlArgv("b", "true"),
	}
	if h.cfg.alt != "" {
		argv = append(argv, h.conchArgvBin(h.cfg.alt, "b", 1, []string{"-v"}, "true"))
	}
	wall, rss, cpu := make([][]float64, len(argv)), make([][]float64, len(argv)), make([][]float64, len(argv))
	var toEnq, toHeld, toRel, toExit []float64
	for i := range warm + h.cfg.reps1 {
		var order []int
		for k := range argv {
			order = append(order, (k+i)%len(argv))
		}
		for _, k := range order {
			p, err := h.runOne(argv[k], 30*time.Second)
			if err != nil {
				return sec, err
			}
			if p.status != 0 {
				return sec, fmt.Errorf("%s: exit %d: %s", p.name, p.status, p.stderrText())
			}
			if i < warm {
				continue
			}
			wall[k] = append(wall[k], durMs(p.wall()))
			rss[k] = append(rss[k], mib(p.maxRSS()))
			cpu[k] = append(cpu[k], durMs(p.cpu()))
			if k == 0 {
				te, ok1 := p.lineTime("enqueued")
				th, ok2 := p.lineTime("slot held")
				tr, ok3 := p.lineTime("released")
				if ok1 && ok2 && ok3 {
					toEnq = append(toEnq, ms(te-p.start))
					toHeld = append(toHeld, ms(th-te))
					toRel = append(toRel, ms(tr-th))
					toExit = append(toExit, ms(p.end-tr))
				}
			}
		}
	}
	n := len(wall[0])
	r := median(wall[0]) / median(wall[1])
	sec.rows = append(sec.rows,
		row{measure: fmt.Sprintf("wall time p50 (ms), %d runs", n), conch: f2(median(wall[0])), ref: f2(median(wall[1])), ratio: f2(r), target: "<= 1.0", met: metStr(r <= 1.0)},
		row{measure: "wall time p99 (ms)", conch: f2(benchkit.Pct(wall[0], 99)), ref: f2(benchkit.Pct(wall[1], 99)), ratio: f2(benchkit.Pct(wall[0], 99) / benchkit.Pct(wall[1], 99))},
		row{measure: "peak RSS p50 (MiB, largest process of the tree)", conch: f1(median(rss[0])), ref: f1(median(rss[1])), ratio: f2(median(rss[0]) / median(rss[1]))},
		row{measure: "CPU user+sys p50 (ms, whole tree)", conch: f1(median(cpu[0])), ref: f1(median(cpu[1])), ratio: f2(median(cpu[0]) / median(cpu[1]))},
	)
	if len(argv) > 2 {
		ra := median(wall[2]) / median(wall[1])
		sec.rows = append(sec.rows,
			row{measure: "-alt " + h.cfg.alt + ": wall time p50 (ms)", conch: f2(median(wall[2])), ref: f2(median(wall[1])), ratio: f2(ra), target: "<= 1.0", met: metStr(ra <= 1.0)},
			row{measure: "-alt: peak RSS p50 (MiB) / CPU p50 (ms)", conch: f1(median(rss[2])) + " / " + f1(median(cpu[2])), ref: f1(median(rss[1])) + " / " + f1(median(cpu[1]))},
		)
	}
	sec.detail = append(sec.detail, fmt.Sprintf(`Where conch's wall time goes (p50 of %d runs, from the harness's read times of conch's -v lines):

| stage | ms |
| --- | --- |
| exec to "enqueued" (process start, flags, client, LeaseGrant, enqueue Txn) | %s |
| "enqueued" to "slot held" | %s |
| "slot held" to "released" (guardian start, child, guardian teardown, LeaseRevoke) | %s |
| "released" to exit (the LeaseRevoke, sent after that line: etcd's commit and answer; then closing the client and the bus, exit, wait4) | %s |
`, len(toEnq), f2(median(toEnq)), f2(median(toHeld)), f2(median(toRel)),
		f2(median(toExit))))
	return sec, nil
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func metStr(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
