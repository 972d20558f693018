package fleetlock

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/sematest"
)

// A client that trickles its headers (slowloris) holds only its own connection: others
// are served meanwhile, and the server cuts it after its header timeout.
func TestSlowloris(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 1}, time.Hour)
	var slow []net.Conn
	for range 20 {
		conn, err := net.Dial("tcp", s.base[len("http://"):])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("POST /v1/pre-reboot HTTP/1.1\r\nHost: x\r\nfleet-lock-protocol: tr")); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, conn)
	}
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a byte a second on each: never a whole header
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, conn := range slow {
					_, _ = conn.Write([]byte("u"))
				}
			}
		}
	}()
	f := newClient(s.base, zincati, idA, "default")
	if r, err := f.lock(); err != nil || !r.ok() {
		t.Fatalf("lock beside 20 slow clients: %v %+v", err, r)
	}
	t.Logf("a lock beside 20 slowloris connections answered in %v", time.Since(start).Round(time.Millisecond))
	// the slow connections are cut (the server answers or closes) within its header timeout
	_ = slow[0].SetReadDeadline(time.Now().Add(headerTimeout + 10*time.Second))
	_, err := bufio.NewReader(slow[0]).ReadString('\n')
	close(stop)
	wg.Wait()
	if cut := time.Since(start); err == nil || cut > headerTimeout+10*time.Second {
		t.Errorf("the slow connection: %v after %v; want it cut after the header timeout %v", err, cut, headerTimeout)
	} else {
		t.Logf("the slow connection was cut after %v (%v)", cut.Round(time.Millisecond), err)
	}
}

// loadRate and loadFor: 1,000 requests a second for 10 s by default; CONCH_FLEETLOCK_RATE
// and CONCH_FLEETLOCK_SOAK change them.
func loadRate(t *testing.T) int {
	if v := os.Getenv("CONCH_FLEETLOCK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CONCH_FLEETLOCK_RATE %q", v)
		}
		return n
	}
	return 1000
}

// loadClientsFor is how many nodes TestLoad runs at once, each one request at a time
// (CONCH_FLEETLOCK_CLIENTS, default 50): the 1,000 requests a second asked are sent when
// the server answers within clients/1000 s a request. 50 keep a race-detector build of
// etcd and the server within their time-outs on a loaded 2-core machine; a figure of the
// server's own rate takes more (docs/rolling-reboots.md gives the command).
func loadClientsFor(t *testing.T) int {
	if v := os.Getenv("CONCH_FLEETLOCK_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CONCH_FLEETLOCK_CLIENTS %q", v)
		}
		return n
	}
	return 50
}

// A burst of requests from loopback (1,000 a second for 10 s asked, as many as loadClients
// nodes can send on this machine; loadClients nodes alternating
// pre-reboot and steady-state on a capacity-5 group) is served or refused cleanly: every
// answer is 200, 423 or 503 with its JSON body, never more than 5 slots are taken, and at
// the end etcd holds exactly the slots of the nodes whose last granted request was a
// pre-reboot (nothing lost, nothing extra).
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 5}, time.Hour)
	rate, d, loadClients := loadRate(t), soak(t), loadClientsFor(t)
	// one token per request, spread over each millisecond tick; a token no worker is free
	// to take is dropped (counted), so the run ends after d however slow the machine is
	tokens := make(chan struct{}, loadClients)
	var dropped atomic.Int64
	var feeder sync.WaitGroup
	feeder.Add(1)
	go func() {
		defer feeder.Done()
		defer close(tokens)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start, sent := time.Now(), 0
		for time.Since(start) < d {
			<-tick.C
			for due := int(time.Since(start).Seconds() * float64(rate)); sent < due; sent++ {
				select {
				case tokens <- struct{}{}:
				default:
					dropped.Add(1)
				}
			}
		}
	}()
	stop := maxHolders(t, c, "default", 5)
	var statuses sync.Map
	var total atomic.Int64
	holding := make([]bool, loadClients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range loadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := newClient(s.base, clientStyle(i%2), fmt.Sprintf("load-%03d", i), "default")
			for range tokens {
				var r reply
				var err error
				if holding[i] {
					r, err = f.unlock()
				} else {
					r, err = f.lock()
				}
				if err != nil {
					t.Errorf("%s: %v", f.id, err)
					return
				}
				total.Add(1)
				n, _ := statuses.LoadOrStore(r.status, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				switch {
				case r.ok():
					holding[i] = !holding[i]
				case r.status == 423 || r.status == 503:
				default:
					t.Errorf("%s: %d %s %s", f.id, r.status, r.kind, r.value)
				}
			}
		}()
	}
	wg.Wait()
	feeder.Wait()
	elapsed := time.Since(start)
	most := stop()
	var counts []string
	statuses.Range(func(k, v any) bool {
		counts = append(counts, fmt.Sprintf("%d: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(counts)
	t.Logf("%d requests in %v (%.0f/s; asked %d/s, %d not sent for want of a free client): %v; max slots taken seen %d", total.Load(), elapsed.Round(time.Millisecond),
		float64(total.Load())/elapsed.Seconds(), rate, dropped.Load(), counts, most)
	if most > 5 {
		t.Errorf("%d slots taken at once in default[max=5]", most)
	}
	var want []string
	for i, h := range holding {
		if h {
			want = append(want, fmt.Sprintf("load-%03d", i))
		}
	}
	got := nodes(holders(t, c, "default", 5))
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("etcd holds %v, the answers said %v", got, want)
	}
}
