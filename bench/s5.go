package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conch-project/conch/internal/metrics"
	"github.com/conch-project/conch/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waiter5 is one in-process sema client of scenario 5: its own Semaphore,
// lease and key, as a separate conch process would have.
type waiter5 struct {
	start    time.Time
	enqueued atomic.Int64 // ns after start; 0 until Enqueued
	waiting  atomic.Bool
	lease    atomic.Int64
	reenter  atomic.Int32
	held     atomic.Int64 // ns from start to Held (the wait); 0 until then
	err      error
	done     chan struct{}
}

// failed reports whether the waiter's Acquire ended without a slot.
func (w *waiter5) failed() bool {
	select {
	case <-w.done:
		return w.held.Load() == 0
	default:
		return false
	}
}

// queued counts the waiters of v that were enqueued and did not fail.
func (v *variant5) queued() int {
	n := 0
	for _, w := range v.ws {
		if w.enqueued.Load() > 0 && !w.failed() {
			n++
		}
	}
	return n
}

// variant5 is one queue of W waiters with one keep-alive cadence.
type variant5 struct {
	name, label string
	every       time.Duration // Options.WaitKeepAlive
	ws          []*waiter5
	gates       []*sema.Holder
	first, last []float64 // enqueue latency (ms) of the first and last 100, enqueued one at a time
	lastCost    etcdCost  // server counters over the last 100 enqueues
	window      time.Duration
	ka          etcdCost // server counters over the steady window
	cpuWindow   time.Duration
	rssKB       int64
	selfCPU     time.Duration
	drain       etcdCost
	drainTime   time.Duration
	drainCPU    time.Duration
	hwmKB       int64
	lost        int   // waiters whose lease the harness revoked mid-drain
	nWindow     int   // waiters queued during the steady window
	refused     error // why enqueueing stopped before W (etcd refused or stalled), nil if all W queued
}

// scenario5: 10,000 waiters on one semaphore, as in-process sema
// clients sharing a few clientv3 connections, each with its own lease and
// key. Two queues in one run differ only in the cadence of the keep-alives
// of waiters behind the head (A: the holders' min(TTL/6, 1 s) for every
// waiter; B: the default TTL/3); for each, the server's keep-alive
// messages, CPU and RSS over a steady window. Queue B is then drained
// through --max N with holders releasing in random order, a few waiters'
// leases revoked on the way (they must re-enter and still be served), and
// the server's watch events per release.
func (h *harness) scenario5() (*section, error) {
	sec := &section{n: 5, title: fmt.Sprintf("%d waiters on one semaphore (in-process sema clients)", h.cfg.waiters5)}
	clis := make([]*clientv3.Client, h.cfg.conns5)
	for i := range clis {
		c, err := h.etcd.client()
		if err != nil {
			return sec, err
		}
		defer c.Close()
		clis[i] = c
	}
	a := &variant5{name: "s5a", label: "A: every waiter at min(TTL/6, 1 s)", every: time.Nanosecond}
	b := &variant5{name: "s5b", label: "B: waiters behind the head at TTL/3 (default)"}
	for _, v := range []*variant5{b, a} { // B first: it is drained, A only fills and gives up
		ctx, cancel := context.WithCancel(h.ctx)
		err := h.run5(ctx, clis, v, v == b)
		cancel()
		for _, w := range v.ws {
			<-w.done
		}
		for _, g := range v.gates {
			_ = g.Release(context.Background())
		}
		if err != nil {
			return sec, fmt.Errorf("%s: %w", v.label, err)
		}
		fmt.Fprintf(logOut, "bench:   %s: %.0f keep-alives/s, etcd CPU %.2f s/s\n", v.label, v.ka.msgsIn["LeaseKeepAlive"]/v.window.Seconds(), v.cpuWindow.Seconds()/v.window.Seconds())
	}
	report5(sec, h.cfg, a, b)
	return sec, nil
}

// run5 fills one queue: N gate holders, then W waiters (the first and last
// 100 one at a time, timed; the rest 64 at a time), then a steady window;
// with drain, releases the gates and drains the queue.
func (h *harness) run5(ctx context.Context, clis []*clientv3.Client, v *variant5, drain bool) error {
	cfg := h.cfg
	opts := sema.Options{TTL: cfg.ttl5, ConnectTimeout: 30 * time.Second, WaitKeepAlive: v.every}
	for i := range cfg.max5 {
		s, err := sema.New(clis[i%len(clis)], v.name, cfg.max5, opts)
		if err != nil {
			return err
		}
		g, err := s.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("gate %d: %w", i, err)
		}
		v.gates = append(v.gates, g)
	}
	var releases atomic.Int64
	start := func(i int) *waiter5 {
		w := &waiter5{start: time.Now(), done: make(chan struct{})}
		o := opts
		o.OnEvent = func(e sema.Event) {
			switch e.Kind {
			case sema.Enqueued:
				w.lease.Store(int64(e.Lease))
				if w.enqueued.Load() == 0 {
					w.enqueued.Store(int64(time.Since(w.start)))
				}
			case sema.Waiting:
				w.waiting.Store(true)
			case sema.Reentering:
				w.reenter.Add(1)
			}
		}
		v.ws = append(v.ws, w)
		go func() {
			defer close(w.done)
			s, err := sema.New(clis[i%len(clis)], v.name, cfg.max5, o)
			if err != nil {
				w.err = err
				return
			}
			hd, err := s.Acquire(ctx)
			if err != nil {
				w.err = err
				return
			}
			w.held.Store(int64(time.Since(w.start)))
			time.Sleep(time.Duration(rand.Int64N(int64(2*cfg.hold5) + 1))) // random hold: releases in random order
			w.err = hd.Release(context.Background())
			releases.Add(1)
		}()
		return w
	}
	waitEnq := func(w *waiter5) error {
		return h.waitFor("enqueue", 30*time.Second, 200*time.Microsecond, func() (bool, error) {
			select {
			case <-w.done:
				return false, fmt.Errorf("waiter ended before enqueue: %v", w.err)
			default:
			}
			return w.enqueued.Load() > 0, nil
		})
	}
	fill := func() error {
		one := min(100, cfg.waiters5/4)
		for i := range one {
			w := start(i)
			if err := waitEnq(w); err != nil {
				return err
			}
			v.first = append(v.first, ms(w.enqueued.Load()))
		}
		lanes := make(chan struct{}, 64)
		var wg sync.WaitGroup
		var errMu sync.Mutex
		var laneErr error
		failed := func() error { errMu.Lock(); defer errMu.Unlock(); return laneErr }
		for i := one; i < cfg.waiters5-one; i++ {
			lanes <- struct{}{}
			w := start(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-lanes }()
				if err := waitEnq(w); err != nil {
					errMu.Lock()
					laneErr = cmp.Or(laneErr, fmt.Errorf("waiter %d: %w", i, err))
					errMu.Unlock()
				}
			}()
			if failed() != nil {
				break
			}
		}
		wg.Wait()
		if err := failed(); err != nil {
			return err
		}
		m0, err := h.etcd.scrape()
		if err != nil {
			return err
		}
		for i := cfg.waiters5 - one; i < cfg.waiters5; i++ {
			w := start(i)
			if err := waitEnq(w); err != nil {
				return err
			}
			v.last = append(v.last, ms(w.enqueued.Load()))
		}
		m1, err := h.etcd.scrape()
		if err != nil {
			return err
		}
		v.lastCost = costOf(metrics.Delta(m0, m1))
		return nil
	}
	if err := fill(); err != nil { // etcd refused or stalled: measure what is queued
		v.refused = err
		fmt.Fprintf(logOut, "bench:   %s: enqueue stopped after %d waiters: %v\n", v.label, len(v.ws), err)
	}
	settle := 120 * time.Second
	if v.refused != nil { // etcd is behind: measure what is queued now
		settle = 20 * time.Second
	}
	if err := h.waitFor("all waiting", settle, 50*time.Millisecond, func() (bool, error) {
		for _, w := range v.ws {
			if !w.waiting.Load() && !w.failed() {
				return false, nil
			}
		}
		return true, nil
	}); err != nil && v.refused == nil {
		return err
	}
	if err := h.window5(v); err != nil {
		return err
	}
	if !drain {
		return nil
	}
	return h.drain5(ctx, clis[0], v, &releases)
}

// window5 measures the server over a steady window of cfg.window5: every
// waiter queued, nothing released; only keep-alives flow.
func (h *harness) window5(v *variant5) error {
	// one full TTL first, so every lease is in its steady cadence
	select {
	case <-time.After(h.cfg.ttl5):
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
	v.nWindow = v.queued()
	c0, _ := procCPU(h.etcd.pid)
	s0, _ := procCPU(os.Getpid())
	m0, err := h.etcd.scrape()
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-time.After(h.cfg.window5):
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
	m1, err := h.etcd.scrape()
	if err != nil {
		return err
	}
	v.window = time.Since(t0)
	c1, _ := procCPU(h.etcd.pid)
	s1, _ := procCPU(os.Getpid())
	v.cpuWindow, v.selfCPU = c1-c0, s1-s0
	v.rssKB, _ = procStatusKB(h.etcd.pid, "VmRSS")
	v.ka = costOf(metrics.Delta(m0, m1))
	return nil
}

// drain5 releases the gates and waits until every waiter has held and
// released. While it drains, the leases of a few random waiters still
// queued are revoked (a lost waiter): each must re-enter and be served.
func (h *harness) drain5(ctx context.Context, c *clientv3.Client, v *variant5, releases *atomic.Int64) error {
	c0, _ := procCPU(h.etcd.pid)
	m0, err := h.etcd.scrape()
	if err != nil {
		return err
	}
	t0 := time.Now()
	gates := v.gates
	v.gates = nil
	for _, i := range rand.Perm(len(gates)) {
		if err := gates[i].Release(ctx); err != nil {
			return err
		}
	}
	revoked := map[int64]bool{}
	for len(revoked) < h.cfg.lost5 && releases.Load() < int64(len(v.ws)/2) {
		w := v.ws[len(v.ws)/2+rand.IntN(len(v.ws)/2)]
		id := w.lease.Load()
		if revoked[id] || w.held.Load() != 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Revoke(rctx, clientv3.LeaseID(id))
		cancel()
		if err == nil {
			revoked[id] = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.lost = len(revoked)
	timeout := time.After(h.cfg.drainTimeout5)
	for _, w := range v.ws {
		select {
		case <-w.done:
		case <-timeout:
			return fmt.Errorf("drain: %d of %d waiters served after %v", releases.Load(), len(v.ws), h.cfg.drainTimeout5)
		}
		if w.enqueued.Load() == 0 { // refused at enqueue (reported), never queued
			continue
		}
		if w.err != nil && !errors.Is(w.err, sema.ErrReleased) {
			return fmt.Errorf("waiter: %w", w.err)
		}
	}
	v.drainTime = time.Since(t0)
	m1, err := h.etcd.scrape()
	if err != nil {
		return err
	}
	c1, _ := procCPU(h.etcd.pid)
	v.drainCPU = c1 - c0
	v.drain = costOf(metrics.Delta(m0, m1))
	v.hwmKB, _ = procStatusKB(h.etcd.pid, "VmHWM")
	return nil
}
