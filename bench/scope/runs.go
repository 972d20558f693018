package scopebench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// uncontendedWarm is the number of runs per variant that are not counted.
const uncontendedWarm = 2

// uncontended runs each variant Reps times (plus warm-up) on a lock of its own, the variants
// interleaved and rotated, with bench-stamp holding nothing as the child: whole-process wall
// time, and for conch the split at its -v lines.
func (d *driver) uncontended(vs []*variant) error {
	stamps := filepath.Join(d.cfg.Work, "uncontended.stamps")
	for i := range uncontendedWarm + d.cfg.Reps {
		for k := range vs {
			v := vs[(k+i)%len(vs)]
			tag := fmt.Sprintf("u%s%d", v.key, i)
			p, err := d.spawn(d.argv(v, "u6"+v.key, stamps, tag))
			if err != nil {
				return err
			}
			if err := p.wait(); err != nil {
				return err
			}
			if i < uncontendedWarm {
				continue
			}
			v.wall = append(v.wall, ms(p.end-p.start))
			if v.conch {
				d.split(v, p, stamps, tag)
				if v.trace == nil {
					v.trace = map[string][]float64{}
				}
				p.traces(v.trace)
			}
		}
	}
	return nil
}

// split records where a conch run's time went, from its -v lines and its child's first stamp.
func (d *driver) split(v *variant, p *proc, stamps, tag string) {
	th, ok1 := p.lineTime("slot held")
	tr, ok2 := p.lineTime("released")
	ev, err := readStamps(stamps)
	if !ok1 || !ok2 || err != nil {
		return
	}
	for _, e := range ev {
		if e.tag == tag && e.kind == "S" {
			v.toHeld = append(v.toHeld, ms(th-p.start))
			v.heldToChild = append(v.heldToChild, ms(e.t-th))
			v.relToExit = append(v.relToExit, ms(p.end-tr))
			return
		}
	}
}

// batch is one hand-off batch of v: a gate holder whose child blocks on a FIFO, Batch waiters
// queued behind it (all keys seen in etcd), then the gate's release, after which the slot
// passes down the queue. A hand-off is a waiter's first stamp minus the last stamp of the
// child before it.
func (d *driver) batch(v *variant, round int) error {
	name := d.name(v)
	stamps := filepath.Join(d.cfg.Work, fmt.Sprintf("h-%s-%d.stamps", v.key, round))
	fifo := filepath.Join(d.cfg.Work, fmt.Sprintf("gate-%s-%d", v.key, round))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return err
	}
	defer os.Remove(fifo)
	gate, err := d.spawn(d.argv(v, name, stamps, "gate", fifo))
	if err != nil {
		return err
	}
	ps := []*proc{gate}
	defer func() {
		for _, p := range ps {
			if p.end == 0 {
				_ = p.cmd.Process.Kill()
				_ = p.wait()
			}
		}
	}()
	if err := d.waitKeys(prefix(v, name), 1); err != nil {
		return err
	}
	for i := range d.cfg.Batch {
		p, err := d.spawn(d.argv(v, name, stamps, fmt.Sprintf("w%d", i), fmt.Sprint(d.cfg.HoldMs)))
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	if err := d.waitKeys(prefix(v, name), int64(d.cfg.Batch+1)); err != nil {
		return err
	}
	if err := benchkit.ReleaseFIFO(fifo, 30*time.Second); err != nil {
		return err
	}
	for _, p := range ps {
		if err := p.wait(); err != nil {
			return err
		}
	}
	if err := d.handoffs(v, stamps); err != nil {
		return err
	}
	return d.handoffTraces(v, stamps, ps[1:])
}

// handoffTraces adds, for each waiter of a batch (ws[i] is tag w<i>), the first time of each of
// its trace points after the previous child's last instruction, in ms from it (Config.Trace).
func (d *driver) handoffTraces(v *variant, stamps string, ws []*proc) error {
	if !d.cfg.Trace || !v.conch {
		return nil
	}
	ev, err := readStamps(stamps)
	if err != nil {
		return err
	}
	if v.htrace == nil {
		v.htrace = map[string][]float64{}
	}
	var lastEnd int64
	for _, e := range ev {
		i, err := strconv.Atoi(strings.TrimPrefix(e.tag, "w"))
		switch {
		case e.kind == "E":
			lastEnd = e.t
		case e.kind == "S" && err == nil && i < len(ws) && lastEnd != 0:
			ws[i].tracesSince(lastEnd, v.htrace)
		}
	}
	return nil
}

// handoffs adds the batch's hand-offs from its stamp file to v.
func (d *driver) handoffs(v *variant, stamps string) error {
	ev, err := readStamps(stamps)
	if err != nil {
		return err
	}
	var lastEnd int64
	running := 0
	for _, e := range ev {
		switch e.kind {
		case "S":
			running++
			if running > 1 {
				v.overlaps++
			}
			if lastEnd != 0 {
				v.handoffs = append(v.handoffs, ms(e.t-lastEnd))
			}
		case "E":
			running--
			lastEnd = e.t
		}
	}
	return nil
}

// waitKeys polls etcd until prefix holds n keys (generous: the machine may be loaded).
func (d *driver) waitKeys(prefix string, n int64) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		resp, err := d.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: fewer than %d keys after 60s (%v)", prefix, n, err)
		}
		time.Sleep(5 * time.Millisecond) // polling etcd, not synchronising processes
	}
}
