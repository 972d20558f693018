package fleetlock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is what a Server serves, decided once by its caller.
type Config struct {
	Client *clientv3.Client
	// Groups maps each served group to its semaphore's capacity: group G is the
	// semaphore G[max=Groups[G]] (D19). Names must pass ValidGroup.
	Groups map[string]int
	// Hold is the TTL of a granted slot's lease, which nobody keeps alive: a node that
	// never comes back stalls its group this long (whole seconds, rounded up).
	Hold time.Duration
	// Queue, when not 0, keeps a refused node's place in the queue for Queue after its
	// last request (first come, first served across polling nodes, D19a); 0: whoever asks
	// first after a release gets the slot.
	Queue time.Duration
	// Record is written in each granted slot's record (PID, Unit: the server's); Host,
	// State and times are filled in, Via is ViaFleetLock.
	Record schema.Record
	// Timeout bounds each request's etcd work; past it the request gets
	// backend_unavailable. 0: DefaultTimeout.
	Timeout time.Duration
	// OnEvent, if set, is told of each grant and release (from the request's goroutine:
	// it must be safe for concurrent use and not block).
	OnEvent func(Event)
}

// DefaultTimeout bounds a request's etcd work: long enough for an etcd leader election
// (1-2 s) with room, short against a client's own 30 minutes.
const DefaultTimeout = 10 * time.Second

// Event is a grant (Granted true) or a release of a reboot slot.
type Event struct {
	Granted bool
	Group   string
	Max     int
	ID      string
	Slot    sema.HeldAfter
}

// Server answers the protocol's requests (ServeHTTP), /metrics and /healthz. Its methods
// may be called from several goroutines.
type Server struct {
	cfg     Config
	counter counters
}

// New returns a Server for cfg. Errors: no client, no group, a group name that breaks
// ValidGroup, a capacity outside 1..schema.MaxCapacity, a Hold under a second.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("no etcd client")
	}
	if len(cfg.Groups) == 0 {
		return nil, errors.New("no group to serve")
	}
	for g, n := range cfg.Groups {
		if err := ValidGroup(g); err != nil {
			return nil, err
		}
		if n < 1 || n > schema.MaxCapacity {
			return nil, fmt.Errorf("group %q: capacity %d: must be 1..%d", g, n, schema.MaxCapacity)
		}
	}
	if cfg.Queue != 0 && cfg.Queue < time.Second {
		return nil, fmt.Errorf("queue %v: must be at least 1s", cfg.Queue)
	}
	if cfg.Hold < time.Second {
		return nil, fmt.Errorf("hold %v: must be at least 1s", cfg.Hold)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Record.Via = schema.ViaFleetLock
	return &Server{cfg: cfg, counter: newCounters()}, nil
}

// Groups returns the served groups' names, sorted.
func (s *Server) Groups() []string {
	var out []string
	for g := range s.cfg.Groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Capacity is the capacity group g is served with, 0 when it is not served.
func (s *Server) Capacity(g string) int { return s.cfg.Groups[g] }

// ServeHTTP routes a request by its path, with repeated slashes merged and never
// redirected (a redirect turns a client's POST into a body-less GET): a path ending in
// /v1/pre-reboot or /v1/steady-state is the protocol (POST only), /metrics and /healthz
// are GET or HEAD; anything else is 404 not_found. Every refusal is the protocol's JSON
// error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := mergeSlashes(r.URL.Path)
	switch {
	case strings.HasSuffix(path, "/v1/"+APIPreReboot):
		s.protocol(w, r, APIPreReboot)
	case strings.HasSuffix(path, "/v1/"+APISteadyState):
		s.protocol(w, r, APISteadyState)
	case path == "/metrics":
		if allowGet(w, r) {
			s.metrics(w, r)
		}
	case path == "/healthz":
		if allowGet(w, r) {
			s.healthz(w, r)
		}
	default:
		writeRefusal(w, refuse(KindNotFound, "no such path %s: the protocol's paths end in /v1/%s and /v1/%s", quote(path), APIPreReboot, APISteadyState))
	}
}

// mergeSlashes replaces each run of slashes in p by one: the Flatcar client joins its
// base, which may end in "/", and "/v1/pre-reboot".
func mergeSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeRefusal(w, refuse(KindMethodNotAllowed, "method %s: only GET and HEAD", quote(r.Method)))
	return false
}

// protocol answers one protocol request of api, and counts it.
func (s *Server) protocol(w http.ResponseWriter, r *http.Request, api string) {
	result, ref := s.answer(w, r, api)
	if ref != nil {
		if ref.Kind == KindMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		writeRefusal(w, ref)
		result = string(ref.Kind)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	s.counter.add(api, result)
}

// answer checks the request in the protocol's order (method, header, body, group) and
// does what api asks. It returns the result's name for the counters, or a refusal.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, api string) (string, *Refusal) {
	if r.Method != http.MethodPost {
		return "", refuse(KindMethodNotAllowed, "method %s: the FleetLock protocol takes POST only", quote(r.Method))
	}
	if v := r.Header.Get(ProtocolHeader); !strings.EqualFold(strings.TrimSpace(v), "true") {
		return "", refuse(KindMissingHeader, "the header \"%s: true\" is missing or has another value", ProtocolHeader)
	}
	id, group, ref := parseBody(http.MaxBytesReader(w, r.Body, MaxBody))
	if ref != nil {
		return "", ref
	}
	max, ok := s.cfg.Groups[group]
	if !ok {
		return "", refuse(KindUnknownGroup, "group %s is not served here; served: %s", quote(group), strings.Join(s.Groups(), ", "))
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if api == APIPreReboot {
		return s.lock(ctx, group, max, id)
	}
	return s.unlock(ctx, group, max, id)
}
