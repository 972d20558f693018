package fleetlock

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// maxHolders samples group[max]'s keys in etcd every few milliseconds until stop, and
// returns the most slots seen taken at once: keys whose record is held after a run (a
// place kept by --queue is a waiter's key, not a slot).
func maxHolders(t *testing.T, c *clientv3.Client, group string, max int) (stop func() int) {
	var most atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := c.Get(ctx, schema.Prefix(group, max), clientv3.WithPrefix())
			cancel()
			if err == nil {
				n := int64(0)
				for _, kv := range resp.Kvs {
					if schema.DecodeRecord(kv.Value).IsHeldAfter() {
						n++
					}
				}
				if n > most.Load() {
					most.Store(n)
				}
			}
			time.Sleep(5 * time.Millisecond) // the sampling period, not a synchronisation
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return int(most.Load())
	}
}

// pollUntilGranted polls pre-reboot as zincati does (here every period) until a 2xx, and
// returns how long it waited. Errors: a refusal other than 423, or within passing.
func pollUntilGranted(f *fleetClient, period, within time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		r, err := f.lock()
		if err != nil {
			return 0, err
		}
		if r.ok() {
			return time.Since(start), nil
		}
		if r.status != 423 {
			return 0, fmt.Errorf("%s: %d %s %s", f.id, r.status, r.kind, r.value)
		}
		if time.Since(start) > within {
			return 0, fmt.Errorf("%s: not granted within %v", f.id, within)
		}
		time.Sleep(period) // the client's poll interval
	}
}

// rebootRounds runs n clients against the bases (round-robin, both client styles): each
// polls pre-reboot every period until granted, "reboots" for down, then calls
// steady-state until it is granted, and starts over until cycleFor has passed (once at
// least). It returns each client's longest wait and the number of grants in all.
func rebootRounds(t *testing.T, bases []string, group string, n int, period, down, cycleFor time.Duration) ([]time.Duration, int) {
	t.Helper()
	waits := make([]time.Duration, n)
	var grants atomic.Int64
	errs := make(chan error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := newClient(bases[i%len(bases)]+"/", clientStyle(i%2), fmt.Sprintf("node-%02d", i), group)
			for first := true; first || time.Since(start) < cycleFor; first = false {
				w, err := pollUntilGranted(f, period, cycleFor+time.Minute)
				if err != nil {
					errs <- err
					return
				}
				waits[i] = max(waits[i], w)
				grants.Add(1)
				time.Sleep(down) // the node's reboot: work, not a synchronisation
				if err := unlockUntilOK(f, period); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return waits, int(grants.Load())
}

// unlockUntilOK calls steady-state every period until a 2xx, as zincati does at boot.
func unlockUntilOK(f *fleetClient, period time.Duration) error {
	for range 1000 {
		r, err := f.unlock()
		if err != nil {
			return err
		}
		if r.ok() {
			return nil
		}
		time.Sleep(period)
	}
	return fmt.Errorf("%s: steady-state never granted", f.id)
}

// soak is how long the many-client tests keep their clients cycling: CONCH_FLEETLOCK_SOAK
// (a Go duration; the figures in the design record come from 60s), else 10 s.
func soak(t *testing.T) time.Duration {
	if v := os.Getenv("CONCH_FLEETLOCK_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CONCH_FLEETLOCK_SOAK: %v", err)
		}
		return d
	}
	return 10 * time.Second
}

// 20 clients polling a capacity-2 group: never more than 2 holders in etcd, and every
// client gets through (D19).
func TestTwentyClients(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 2}, time.Hour)
	stop := maxHolders(t, c, "default", 2)
	waits, grants := rebootRounds(t, []string{s.base}, "default", 20, 20*time.Millisecond, 50*time.Millisecond, soak(t))
	most := stop()
	t.Logf("20 clients, capacity 2, for %v: %d grants, every client through, max holders seen %d, longest wait %v", soak(t), grants, most, longest(waits))
	if most > 2 {
		t.Errorf("%d holders seen at once in default[max=2]", most)
	}
	if got := holders(t, c, "default", 2); len(got) != 0 {
		t.Errorf("slots left after every steady-state: %v", nodes(got))
	}
}

// Two servers on one etcd, clients split between them: still at most N (state only in
// etcd; the grant's Txn is conditional on the queue as read).
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	srv2 := serve(t, c, map[string]int{"default": 2}, time.Hour)
	srv1 := serve(t, c, map[string]int{"default": 2}, time.Hour)
	stop := maxHolders(t, c, "default", 2)
	waits, grants := rebootRounds(t, []string{srv1.base, srv2.base}, "default", 20, 10*time.Millisecond, 30*time.Millisecond, soak(t))
	most := stop()
	t.Logf("two servers, 20 clients, capacity 2, for %v: %d grants, max holders seen %d, longest wait %v; grants by server: %d + %d", soak(t), grants, most, longest(waits),
		srv1.srv.Count(APIPreReboot, resultGranted), srv2.srv.Count(APIPreReboot, resultGranted))
	if most > 2 {
		t.Errorf("%d holders seen at once in default[max=2]", most)
	}
	if srv1.srv.Count(APIPreReboot, resultGranted) == 0 || srv2.srv.Count(APIPreReboot, resultGranted) == 0 {
		t.Errorf("one server granted nothing: the test did not test two servers")
	}
}

// One id locking concurrently on two servers gets one slot, never two.
func TestConcurrentLocksOfOneID(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	a := serve(t, c, map[string]int{"default": 5}, time.Hour)
	b := serve(t, c, map[string]int{"default": 5}, time.Hour)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := a.base
			if i%2 == 1 {
				base = b.base
			}
			if r, err := newClient(base, flatcar, idA, "default").lock(); err != nil || !r.ok() {
				t.Errorf("lock %d: %v %+v", i, err, r)
			}
		}()
	}
	wg.Wait()
	if got := nodes(holders(t, c, "default", 5)); len(got) != 1 || got[0] != idA {
		t.Errorf("16 concurrent locks of one id left %q, want one slot", got)
	}
}

func longest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// A holder that never comes back frees its slot after the hold (a lease of --hold that
// nobody keeps alive, by etcd's clock), not before; the operator's release frees one at
// once.
func TestExpiryAndOperatorRelease(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	const hold = 2 * time.Second
	s := serve(t, c, map[string]int{"default": 1}, hold)
	a, b := newClient(s.base, zincati, idA, "default"), newClient(s.base, flatcar, idB, "default")
	if r, err := a.lock(); err != nil || !r.ok() {
		t.Fatalf("lock: %v %+v", err, r)
	}
	granted := time.Now()
	if r, _ := b.lock(); r.status != 423 {
		t.Fatalf("second id while the first holds: %d, want 423", r.status)
	}
	// A never reports back: b polls every 50 ms
	w, err := pollUntilGranted(b, 50*time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	freed := time.Since(granted)
	t.Logf("hold %v: the slot of a node that never came back went to the next poller %v after the grant", hold, freed.Round(time.Millisecond))
	if freed < hold-time.Second { // the lease's TTL is whole seconds, granted after our clock read
		t.Errorf("freed after %v, before the hold of %v", freed, hold)
	}
	if freed > hold+5*time.Second {
		t.Errorf("freed after %v: more than hold + 5 s", freed)
	}
	_ = w
	// the operator frees B's slot at once, by its id, as --release --node does
	rel, err := fleet.ReleaseHeld(t.Context(), c, "default", 1, idB)
	if err != nil || len(rel.Freed) != 1 {
		t.Fatalf("operator release: %v %v", rel, err)
	}
	if r, err := a.lock(); err != nil || !r.ok() {
		t.Fatalf("lock after the operator's release: %v %+v", err, r)
	}
}

// The listing (--who, JSON, metrics) shows a reboot slot as HELD, with the id, via=fleetlock
// and its until.
func TestListingShowsRebootSlot(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 1}, time.Hour)
	if r, err := newClient(s.base, zincati, idA, "default").lock(); err != nil || !r.ok() {
		t.Fatalf("lock: %v %+v", err, r)
	}
	l, err := who.Read(t.Context(), c, "default")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := who.Render(l, who.Options{}, time.Now())
	for _, want := range []string{"default[max=1] HELD", idA, "via=fleetlock until=20"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("--who text lacks %q:\n%s", want, text)
		}
	}
	js, _ := who.Render(l, who.Options{Format: who.JSON}, time.Now())
	for _, want := range []string{`"state": "HELD"`, `"via": "fleetlock"`, `"held_until": "20`, `"host": "` + idA} {
		if !strings.Contains(string(js), want) {
			t.Errorf("--who --json lacks %q:\n%s", want, js)
		}
	}
	prom, _ := who.Render(l, who.Options{Format: who.Prometheus}, time.Now())
	if !strings.Contains(string(prom), `conch_sema_holders{name="default",max="1"} 1`) {
		t.Errorf("metrics do not count the reboot slot:\n%s", prom)
	}
}

// One queue with conch sema jobs (D19): while a job holds, pre-reboot is refused naming
// it; once it ends, granted; while the reboot holds, a job finds no slot.
func TestSharedQueueWithJobs(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"maint": 1}, time.Hour)
	f := newClient(s.base, zincati, idA, "maint")
	h := holdJob(t, c, "maint", 1)
	r, err := f.lock()
	if err != nil || r.status != 423 || r.kind != KindSemaphoreFull || !strings.Contains(r.value, "db-vacuum-node") {
		t.Fatalf("pre-reboot while a job holds: %v %d %s %q, want 423 naming the job's node", err, r.status, r.kind, r.value)
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r, err := f.lock(); err != nil || !r.ok() {
		t.Fatalf("pre-reboot after the job: %v %+v", err, r)
	}
	job2, _ := sema.New(c, "maint", 1, sema.Options{TTL: 5 * time.Second, Nonblock: true, Record: schema.Record{Host: "db-vacuum-node"}})
	if _, err := job2.Acquire(t.Context()); err == nil {
		t.Fatal("a job got the slot while a reboot held it")
	} else if !strings.Contains(err.Error(), "no free slot") {
		t.Fatalf("the job's refusal: %v", err)
	}
}

// etcd down: 503 backend_unavailable with Retry-After, no exit; etcd back: served again
// by itself.
func TestEtcdOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	srv, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 1}, time.Hour)
	f := newClient(s.base, zincati, idA, "default")
	srv.Kill()
	r, err := f.lock()
	if err != nil || r.status != 503 || r.kind != KindBackendUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("lock with etcd down: %v %d %s Retry-After %q", err, r.status, r.kind, r.header.Get("Retry-After"))
	}
	if r, _ := rawDo(f.hc, "GET", s.base+"/healthz", nil, ""); r.status != 503 {
		t.Errorf("healthz with etcd down: %d", r.status)
	}
	srv.Revive(t)
	eventually(t, 30*time.Second, "a grant once etcd is back", func() bool {
		r, err := f.lock()
		return err == nil && r.ok()
	})
}

// etcd refusing for good (a user with read-only permission): 500 backend_error, and
// nothing left behind.
func TestEtcdRefuses(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	open := srv.Client(t)
	ctx := t.Context()
	rng := clientv3.GetPrefixRangeEnd("/conch/v1/")
	for i, step := range []func() error{
		func() error { _, err := open.RoleAdd(ctx, "root"); return err },
		func() error { _, err := open.UserAdd(ctx, "root", "pw-root"); return err },
		func() error { _, err := open.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := open.RoleAdd(ctx, "ro"); return err },
		func() error {
			_, err := open.RoleGrantPermission(ctx, "ro", "/conch/v1/", rng, clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := open.UserAdd(ctx, "ro", "pw-ro"); return err },
		func() error { _, err := open.UserGrantRole(ctx, "ro", "ro"); return err },
		func() error { _, err := open.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	ro, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, Username: "ro", Password: "pw-ro", DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	s := serve(t, ro, map[string]int{"default": 1}, time.Hour)
	r, err := newClient(s.base, zincati, idA, "default").lock()
	if err != nil || r.status != 500 || r.kind != KindBackendError || !strings.Contains(r.value, "permission denied") {
		t.Fatalf("lock as a read-only user: %v %d %s %q", err, r.status, r.kind, r.value)
	}
	srv.Username, srv.Password = "root", "pw-root"
	if got := holders(t, srv.Client(t), "default", 1); len(got) != 0 {
		t.Errorf("keys left: %v", nodes(got))
	}
}

// D17: a group whose name is live under another capacity (a job run with another --max)
// refuses pre-reboot with 423 failed_lock_other_capacity naming the live capacity, and
// writes nothing; once that job ends, the reboot is granted.
func TestOtherCapacityRefused(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"maint": 1}, time.Hour)
	f := newClient(s.base, zincati, idA, "maint")
	h := holdJob(t, c, "maint", 2)
	r, err := f.lock()
	if err != nil || r.status != 423 || r.kind != KindOtherCapacity || !strings.Contains(r.value, "maint is live with max=2") {
		t.Fatalf("pre-reboot of maint[max=1] while a max=2 job holds: %v %d %s %q, want 423 %s naming max=2", err, r.status, r.kind, r.value, KindOtherCapacity)
	}
	if hs := holders(t, c, "maint", 1); len(hs) != 0 {
		t.Fatalf("keys under max=1 after the refusal: %v", nodes(hs))
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r, err := f.lock(); err != nil || !r.ok() {
		t.Fatalf("pre-reboot once the max=2 job ended: %v %+v", err, r)
	}
}
