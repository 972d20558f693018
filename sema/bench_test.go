package sema_test

// Benchmarks of the recipe alone against a real etcd in the test process,
// so that a regression in latency or in what a cycle costs etcd
// shows in benchstat:
//
//	go test -run '^$' -bench . -count 10 ./sema > new.txt; benchstat old.txt new.txt
//
// Besides ns/op each reports the server's own counters per operation,
// scraped from the embedded etcd's /metrics: unary requests (D2: 3 per
// uncontended acquire+release), bytes sent, and watch events sent (D1: at
// most 2 waiters woken per release, so at most 3 events with the releaser's
// own key watch). The server runs with etcdtest's fast timers and
// without fsync, so ns/op is the recipe's own cost plus loopback gRPC, not
// a disk's. The process-level comparison with etcdctl lock is `make bench`.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/metrics"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const benchTimeout = 30 * time.Second

// BenchmarkAcquireRelease is the uncontended cycle: Acquire on a free
// semaphore, then Release (LeaseGrant, the enqueue Txn, LeaseRevoke).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, max := range []int{1, 10} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			srv := etcdtest.Start(b)
			s := benchSem(b, srv.Client(b), "bench-ar", max, sema.Options{})
			ctx := b.Context()
			c := startCounting(b, srv)
			b.ResetTimer()
			for range b.N {
				h, err := s.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c.report(b, b.N)
		})
	}
}

// BenchmarkHandoff times one hand-off: from the holder's Release call to
// the return of the waiter's Acquire (the waiter, queued behind, sees the
// DELETE and takes the slot, D1). Two semaphores on separate clients take
// turns; only the hand-off is timed. The recipe is the one conch runs (D1a's
// watches served at once, the rewrite beside the caller's work, the pause followed
// on the stream, D16b); `make bench`'s -alt compares it with another build. Sub-benchmarks:
//
//   - mode=d1a+early: the name the earlier same-run modes left, kept so runs compare;
//   - release=settled: the holder releases once every watch is registered
//     and synced (the recipe alone); release=at-once: as soon as the
//     waiter says it waits, as a short job does, so a watch still being
//     created, and etcd's 100 ms resync of unsynced watchers, are timed too.
func BenchmarkHandoff(b *testing.B) {
	for _, m := range benchModes {
		for _, settle := range []bool{true, false} {
			name := "mode=" + m.name + "/release=settled"
			if !settle {
				name = "mode=" + m.name + "/release=at-once"
			}
			b.Run(name, func(b *testing.B) { benchHandoff(b, m, settle) })
		}
	}
}

// benchMode names the recipe's sub-benchmarks: one mode, the recipe conch runs (the
// same-run A/B modes went; `make bench -alt` compares builds).
type benchMode struct{ name string }

var benchModes = []benchMode{{"d1a+early"}}

// watchers is how many watches a hand-off's waiter and holder have once settled: the
// holder's key, the waiter's holder and own key, and the pause (D16b).
func (m benchMode) watchers() float64 { return 4 }

func benchHandoff(b *testing.B, m benchMode, settle bool) {
	srv := etcdtest.Start(b)
	ctx := b.Context()
	waiting := make([]chan struct{}, 2)
	sems := make([]*sema.Semaphore, 2)
	for i := range sems {
		ch := make(chan struct{}, 1)
		waiting[i] = ch
		sems[i] = benchSem(b, srv.Client(b), "bench-handoff", 1, sema.Options{OnEvent: func(e sema.Event) {
			if e.Kind == sema.Waiting {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}})
	}
	holder, err := sems[0].Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	c := startCounting(b, srv)
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		next := sems[(i+1)%2]
		wch := waiting[(i+1)%2]
		got := make(chan acquireResult, 1)
		go func() {
			h, err := next.Acquire(ctx)
			got <- acquireResult{h, err}
		}()
		select {
		case <-wch:
		case r := <-got:
			b.Fatalf("acquired without waiting: %v", r.err)
		case <-time.After(benchTimeout):
			b.Fatal("the waiter never queued")
		}
		if settle {
			// The holder's key watch and the waiter's registered and
			// synced: the recipe alone is timed, not etcd's resync loop.
			waitWatchers(b, srv.Metrics, m.watchers())
		}
		b.StartTimer()
		if err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-got
		b.StopTimer()
		if r.err != nil {
			b.Fatal(r.err)
		}
		holder = r.h
	}
	if err := holder.Release(ctx); err != nil {
		b.Fatal(err)
	}
	c.report(b, b.N)
}

// BenchmarkDrain drains a queue: 40 waiters, all enqueued, through --max
// max, each releasing as soon as it holds; ns/job is the drain's time per
// job. A sampler reads etcd's watcher gauges every millisecond meanwhile
// and reports their means (watchers, slow-watchers: watchers in etcd's
// unsynced group, D1a's target) alongside the counters. Modes as in
// BenchmarkHandoff.
func BenchmarkDrain(b *testing.B) {
	for _, m := range benchModes {
		for _, max := range []int{1, 4} {
			b.Run(fmt.Sprintf("mode=%s/max=%d", m.name, max), func(b *testing.B) {
				benchDrain(b, max, m)
			})
		}
	}
}

func benchDrain(b *testing.B, max int, m benchMode) {
	const jobs = 40
	srv := etcdtest.Start(b)
	cli := srv.Client(b)
	prefix := schema.Prefix("bench-drain", max)
	c := startCounting(b, srv)
	var samples, slow, watchers float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var blockers []*sema.Holder // hold every slot while the queue fills
		for range max {
			h, err := benchSem(b, cli, "bench-drain", max, sema.Options{}).Acquire(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			blockers = append(blockers, h)
		}
		var wg sync.WaitGroup
		errs := make(chan error, jobs)
		for range jobs {
			s := benchSem(b, cli, "bench-drain", max, sema.Options{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := s.Acquire(b.Context())
				if err == nil {
					err = h.Release(b.Context())
				}
				errs <- err
			}()
		}
		waitKeys(b, cli, prefix, int64(jobs+max))
		stop := make(chan struct{})
		sampled := make(chan [3]float64, 1)
		go func() { sampled <- sampleWatchers(srv.Metrics, stop) }()
		b.StartTimer()
		for _, h := range blockers {
			if err := h.Release(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		b.StopTimer()
		close(stop)
		sm := <-sampled
		samples, slow, watchers = samples+sm[0], slow+sm[1], watchers+sm[2]
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	c.report(b, b.N*jobs)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jobs), "ns/job")
	b.ReportMetric(slow/max1(samples), "slow-watchers")
	b.ReportMetric(watchers/max1(samples), "watchers")
}

// sampleWatchers reads the watcher gauges every millisecond until stop:
// it returns the number of samples and the sums of slow watchers and of
// watchers.
func sampleWatchers(url string, stop <-chan struct{}) [3]float64 {
	var out [3]float64
	for {
		select {
		case <-stop:
			return out
		case <-time.After(time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
		m, err := metrics.Scrape(ctx, url)
		cancel()
		if err != nil {
			continue
		}
		out[0]++
		out[1] += m.Sum("etcd_debugging_mvcc_slow_watcher_total")
		out[2] += m.Sum("etcd_debugging_mvcc_watcher_total")
	}
}

func max1(v float64) float64 { return max(v, 1) }

// BenchmarkEnqueueDeepQueue is one --nonblock attempt at the back of a
// queue of 100 waiters (LeaseGrant, the enqueue Txn, LeaseRevoke). Its cost
// must not grow with the queue: the enqueue reads O(max) keys, never the
// queue (D2), so sent-B/op stays that of a short queue.
func BenchmarkEnqueueDeepQueue(b *testing.B) {
	const queued = 100
	srv := etcdtest.Start(b)
	ctx, cancel := context.WithCancel(b.Context())
	holderCli := srv.Client(b)
	holder, err := benchSem(b, holderCli, "bench-deep", 1, sema.Options{}).Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// The waiters share one client (one connection): only etcd's work per
	// key matters here, not one process per waiter.
	waitCli := srv.Client(b)
	var wg sync.WaitGroup
	errs := make(chan error, queued)
	for i := range queued {
		s := benchSem(b, waitCli, "bench-deep", 1, sema.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := s.Acquire(ctx)
			if err == nil {
				err = fmt.Errorf("waiter %d acquired while the holder held", i)
				_ = h.Release(context.WithoutCancel(ctx))
			}
			if ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = holder.Release(context.Background())
	})
	waitKeys(b, holderCli, schema.Prefix("bench-deep", 1), queued+1)
	probe := benchSem(b, srv.Client(b), "bench-deep", 1, sema.Options{Nonblock: true})
	c := startCounting(b, srv)
	b.ResetTimer()
	for range b.N {
		if _, err := probe.Acquire(ctx); !errors.Is(err, sema.ErrNoSlot) {
			b.Fatalf("probe: %v, want ErrNoSlot", err)
		}
	}
	b.StopTimer()
	c.report(b, b.N)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

type acquireResult struct {
	h   *sema.Holder
	err error
}

// benchSem is a semaphore with conch's default TTL; opts may set OnEvent
// and Nonblock.
func benchSem(b *testing.B, c *clientv3.Client, name string, max int, opts sema.Options) *sema.Semaphore {
	b.Helper()
	opts.TTL, opts.FenceMargin = sema.DefaultTTL, sema.DefaultFenceMargin
	s, err := sema.New(c, name, max, opts)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// waitKeys polls until prefix holds n keys.
func waitKeys(b *testing.B, c *clientv3.Client, prefix string, n int64) {
	b.Helper()
	etcdtest.WaitKeys(b, c, prefix, n, benchTimeout)
}

// waitWatchers polls the server's gauges until at least n watchers exist
// and none is unsynced (etcd_debugging_mvcc_slow_watcher_total).
func waitWatchers(b *testing.B, url string, n float64) {
	b.Helper()
	deadline := time.Now().Add(benchTimeout)
	for time.Now().Before(deadline) {
		c := scrapeCounters(b, url)
		if c.watchers >= n && c.slowWatchers == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("never %v synced watchers", n)
}

// counting reads the server's counters at the start of the timed loop.
type counting struct {
	url  string
	base serverCounters
}

// serverCounters are the few /metrics samples the benchmarks report.
type serverCounters struct {
	unary, sentBytes, events float64
	watchers, slowWatchers   float64 // gauges
}

func startCounting(b *testing.B, srv *etcdtest.Server) *counting {
	b.Helper()
	return &counting{url: srv.Metrics, base: scrapeCounters(b, srv.Metrics)}
}

// report adds unary-reqs/op, sent-B/op and events/op to the benchmark's
// output. The counters include everything the server did meanwhile,
// keep-alives of other sessions included, so they are per-op averages.
func (c *counting) report(b *testing.B, n int) {
	b.Helper()
	now := scrapeCounters(b, c.url)
	b.ReportMetric((now.unary-c.base.unary)/float64(n), "unary-reqs/op")
	b.ReportMetric((now.sentBytes-c.base.sentBytes)/float64(n), "sent-B/op")
	b.ReportMetric((now.events-c.base.events)/float64(n), "events/op")
}

func scrapeCounters(b *testing.B, url string) serverCounters {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	m, err := metrics.Scrape(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	return serverCounters{
		unary:        m.Sum("grpc_server_handled_total", `grpc_type="unary"`),
		sentBytes:    m.Sum("etcd_network_client_grpc_sent_bytes_total"),
		events:       m.Sum("etcd_debugging_mvcc_events_total"),
		watchers:     m.Sum("etcd_debugging_mvcc_watcher_total"),
		slowWatchers: m.Sum("etcd_debugging_mvcc_slow_watcher_total"),
	}
}

// BenchmarkBurstRefill times the refill of a burst: max holders release at the same moment
// with max waiters queued behind them, as jobs started together end together (make bench's
// drain, scenario 4). The head is promoted by the first DELETE it sees (D1); each waiter after
// it learns that it is next only from the HELD rewrite of the one before it, re-ranks, and is
// promoted, so the slots refill one hop after another, never all at once: first-ms is the
// first waiter's Acquire return, last-ms the last one's (both from the first Release call),
// ms/hop (last-ms - first-ms) / (max - 1). Each waiter keeps its slot until all hold.
func BenchmarkBurstRefill(b *testing.B) {
	const max = 10
	srv := etcdtest.Start(b)
	cli := srv.Client(b)
	prefix := schema.Prefix("bench-burst", max)
	var first, last time.Duration
	for range b.N {
		var blockers []*sema.Holder
		for range max {
			h, err := benchSem(b, cli, "bench-burst", max, sema.Options{}).Acquire(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			blockers = append(blockers, h)
		}
		got := make(chan acquireResult, max)
		took := make(chan time.Time, max)
		for range max {
			s := benchSem(b, cli, "bench-burst", max, sema.Options{})
			go func() {
				h, err := s.Acquire(b.Context())
				took <- time.Now()
				got <- acquireResult{h, err}
			}()
		}
		waitKeys(b, cli, prefix, 2*max)
		// the blockers' own key watches (max), the head's on the holders, the pause (D16b) and
		// its key (max+2), each other waiter's on its predecessor and its key (2 each): all synced
		waitWatchers(b, srv.Metrics, 4*max)
		start := time.Now()
		for _, h := range blockers {
			go func() { _ = h.Release(context.Background()) }()
		}
		var at []time.Duration
		var held []*sema.Holder
		for range max {
			r := <-got
			if r.err != nil {
				b.Fatal(r.err)
			}
			at = append(at, (<-took).Sub(start))
			held = append(held, r.h)
		}
		first, last = first+slices.Min(at), last+slices.Max(at)
		for _, h := range held {
			if err := h.Release(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		waitKeys(b, cli, prefix, 0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Microseconds())/1000/n, "first-ms")
	b.ReportMetric(float64(last.Microseconds())/1000/n, "last-ms")
	b.ReportMetric(float64((last-first).Microseconds())/1000/n/(max-1), "ms/hop")
}
