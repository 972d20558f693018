package fleetlock

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/sematest"
)

// With --queue, grants follow the order of the nodes' first refused requests, whoever
// polls first after a release (D19a); a node that stops asking loses its place after the
// queue's D; steady-state drops a place.
//
// Not parallel: a node that polls every 20 ms keeps its place only while it is not starved
// for the queue's D (2 s); beside the other tests under -race one was.
func TestQueueFIFO(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	s := serveQueue(t, c, map[string]int{"default": 1}, time.Hour, 2*time.Second)
	holder := newClient(s.base, zincati, "holder", "default")
	if r, err := holder.lock(); err != nil || !r.ok() {
		t.Fatalf("first lock: %v %+v", err, r)
	}
	var clients []*fleetClient
	for i := range 5 {
		f := newClient(s.base, clientStyle(i%2), fmt.Sprintf("node-%d", i), "default")
		r, err := f.lock()
		if err != nil || r.status != 423 || !containsAll(r.value, fmt.Sprintf("%d ahead", i+1)) {
			t.Fatalf("%s's first lock: %v %d %q, want 423 with %d ahead", f.id, err, r.status, r.value, i+1)
		}
		clients = append(clients, f)
	}
	// a sixth that stops asking: its place goes after the queue's D
	gone := newClient(s.base, zincati, "gone-node", "default")
	if r, _ := gone.lock(); r.status != 423 {
		t.Fatalf("gone-node's lock: %d", r.status)
	}
	// steady-state of a node that waits drops its place
	dropped := newClient(s.base, flatcar, "dropped-node", "default")
	if r, _ := dropped.lock(); r.status != 423 {
		t.Fatalf("dropped-node's lock: %d", r.status)
	}
	if r, err := dropped.unlock(); err != nil || !r.ok() {
		t.Fatalf("dropped-node's unlock: %v %+v", err, r)
	}
	if r, _ := holder.unlock(); !r.ok() {
		t.Fatal("holder's unlock")
	}
	// all five poll at once, in reverse order, each after its previous one released
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i := len(clients) - 1; i >= 0; i-- {
		f := clients[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := pollUntilGranted(f, 20*time.Millisecond, time.Minute); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, f.id)
			mu.Unlock()
			if err := unlockUntilOK(f, 20*time.Millisecond); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := []string{"node-0", "node-1", "node-2", "node-3", "node-4"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("grants in order %v, want the order of first requests %v", order, want)
	}
	eventually(t, 30*time.Second, "gone-node's place expires", func() bool { return len(holders(t, c, "default", 1)) == 0 })
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// fairness runs 10 zincati-like clients on a capacity-1 group for d: each polls every
// period (+0-10 % jitter, as zincati), reboots for down once granted, reports steady-state
// and asks again at once. It returns every wait, the grants, and the most grants to other
// nodes seen during one node's wait (overtakes).
func fairness(t *testing.T, queue, period, down, d time.Duration) ([]time.Duration, int, int64) {
	_, c := sematest.StartEtcd(t)
	s := serveQueue(t, c, map[string]int{"default": 1}, time.Hour, queue)
	stop := maxHolders(t, c, "default", 1)
	var mu sync.Mutex
	var waits []time.Duration
	var granted, overtakes atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := newClient(s.base, zincati, fmt.Sprintf("node-%d", i), "default")
			jitter := func() time.Duration { return period + time.Duration(rand.Int64N(int64(period)/10+1)) }
			for time.Since(start) < d {
				asked, before := time.Now(), int64(-1)
				for {
					r, err := f.lock()
					if err != nil || !r.ok() && r.status != 423 && r.status != 503 {
						t.Errorf("%s: %v %+v", f.id, err, r)
						return
					}
					if r.ok() {
						break
					}
					if before < 0 && r.status == 423 { // from the answer that kept its place on
						before = granted.Load()
					}
					time.Sleep(jitter()) // the client's poll interval
				}
				if before < 0 {
					before = granted.Load()
				}
				mu.Lock()
				waits = append(waits, time.Since(asked))
				overtakes.Store(max(overtakes.Load(), granted.Load()-before))
				granted.Add(1)
				mu.Unlock()
				time.Sleep(down) // the reboot: work, not a synchronisation
				if err := unlockUntilOK(f, period); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if most := stop(); most > 1 {
		t.Errorf("%d holders at once in default[max=1]", most)
	}
	return waits, len(waits), overtakes.Load()
}

// The --queue figures (D19a): 10 clients polling a capacity-1 group, the longest wait of
// any node and the grants in all, with and without the queue. Without, whoever polls
// first after a release wins, so a node can lose many rounds in a row; with it, a node
// waits for the nodes ahead of it only, at the cost of the slot idling until the head's
// next poll. The assertion does not depend on the machine's speed: with the queue, no
// node sees more than the 9 others granted during one of its waits (one more for a grant
// whose answer crossed its first refusal), counted from its first refusal (the place).
func TestQueueFairness(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	// the queue's D is far longer than a poll (with its latency on a loaded machine): no
	// place expires while its client polls
	const period, down, queueFor = 100 * time.Millisecond, 50 * time.Millisecond, 10 * time.Second
	d := soak(t)
	without, n0, o0 := fairness(t, 0, period, down, d)
	with, n1, o1 := fairness(t, queueFor, period, down, d)
	p := func(ws []time.Duration, q float64) time.Duration {
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		return ws[int(q*float64(len(ws)-1))].Round(time.Millisecond)
	}
	t.Logf("10 clients, capacity 1, poll %v +0-10%%, reboot %v, --queue %v, for %v:", period, down, queueFor, d)
	t.Logf("  without --queue: %d grants, wait median %v, p99 %v, longest %v; most others granted during one wait: %d", n0, p(without, 0.5), p(without, 0.99), p(without, 1), o0)
	t.Logf("  with --queue:    %d grants, wait median %v, p99 %v, longest %v; most others granted during one wait: %d", n1, p(with, 0.5), p(with, 0.99), p(with, 1), o1)
	if o1 > 10 {
		t.Errorf("with --queue a node saw %d grants to others during one wait: more than the 9 others", o1)
	}
}
