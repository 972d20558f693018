package fleetlock

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conch-project/conch/internal/etcderr"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// counters count the protocol's requests by api and result (granted, already_held,
// released, not_held, or the refusal's kind).
type counters struct {
	mu sync.Mutex
	n  map[[2]string]uint64
}

func newCounters() counters { return counters{n: map[[2]string]uint64{}} }

func (c *counters) add(api, result string) {
	c.mu.Lock()
	c.n[[2]string{api, result}]++
	c.mu.Unlock()
}

// Count is the number of requests of api answered with result so far.
func (s *Server) Count(api, result string) uint64 {
	s.counter.mu.Lock()
	defer s.counter.mu.Unlock()
	return s.counter.n[[2]string{api, result}]
}

// render writes the counters in the Prometheus text format, sorted.
func (c *counters) render() string {
	c.mu.Lock()
	keys := make([][2]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	var b strings.Builder
	b.WriteString("# HELP conch_fleetlock_requests_total FleetLock requests answered, by api and result (a refusal's kind).\n")
	b.WriteString("# TYPE conch_fleetlock_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "conch_fleetlock_requests_total{api=%q,result=%q} %d\n", k[0], k[1], c.n[k])
	}
	c.mu.Unlock()
	return b.String()
}

// metrics serves the served groups' conch_sema_* gauges (the listing's metrics, as
// `--who --format prometheus` renders them, of each group's capacity only) and the
// request counters. An etcd that does not answer gives backend_unavailable.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	var all who.Listing
	for _, g := range s.Groups() {
		l, err := who.Read(ctx, s.cfg.Client, g)
		if err != nil {
			writeRefusal(w, backendRefusal(g, s.cfg.Groups[g], err))
			return
		}
		l = who.Filter(l, s.cfg.Groups[g])
		all.Entries = append(all.Entries, l.Entries...)
		all.Pauses = append(all.Pauses, l.Pauses...)
	}
	b, err := who.Render(all, who.Options{Format: who.Prometheus}, time.Now())
	if err != nil {
		writeRefusal(w, refuse(KindBackendError, "cannot render the metrics: %v", err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b)
	_, _ = w.Write([]byte(s.counter.render()))
}

// healthTimeout bounds /healthz's read.
const healthTimeout = 2 * time.Second

// healthz is 200 "ok" while etcd answers a read of the served groups' pause keys within
// healthTimeout, else the refusal backend_unavailable (or backend_error when it refuses).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		writeRefusal(w, err.(*Refusal))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// Ping reads the first served group's pause key: nil when etcd answers, else a *Refusal
// (backend_unavailable, or backend_error when etcd refuses the read). It blocks until
// etcd answers or ctx ends.
func (s *Server) Ping(ctx context.Context) error {
	g := s.Groups()[0]
	if _, err := s.cfg.Client.Get(ctx, schema.PauseKey(g, s.cfg.Groups[g])); err != nil {
		if etcderr.Refused(err) {
			return refuse(KindBackendError, "etcd refused a read: %v", err)
		}
		return refuse(KindBackendUnavailable, "etcd did not answer within %v", healthTimeout)
	}
	return nil
}

// GroupState is a served group's slots as Slots read them.
type GroupState struct {
	Group string
	Max   int
	Keys  int64 // keys in the semaphore's queue: holders (at most Max) and waiters
}

// Held is the number of slots taken.
func (g GroupState) Held() int64 { return min(g.Keys, int64(g.Max)) }

// Slots counts each served group's keys, one count-only read per group, for the service
// manager's status line. Errors: etcd's (it blocks until etcd answers or ctx ends).
func (s *Server) Slots(ctx context.Context) ([]GroupState, error) {
	var out []GroupState
	for _, g := range s.Groups() {
		n := s.cfg.Groups[g]
		resp, err := s.cfg.Client.Get(ctx, schema.Prefix(g, n), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return nil, err
		}
		out = append(out, GroupState{Group: g, Max: n, Keys: resp.Count})
	}
	return out, nil
}
