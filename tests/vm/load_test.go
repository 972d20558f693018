package vm

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// Scenario 9: 200 jobs queued across the nodes (max 3), holders releasing in random order
// (random durations): all complete, at most 3 at once, and the watch events etcd sends per
// release stay flat while the queue drains (D1: a release wakes at most 2 waiters, whatever
// the queue's length), read from the members' own /metrics.
func testQueue(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s9-queue", 3)
	const jobs = 200
	prefix := schema.Prefix(s.name, s.max)
	var mu sync.Mutex
	var samples []sample
	ctx, stop := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			keys := replay(s.obs.history(prefix), s.max)
			deleted := 0
			for _, k := range keys {
				if k.deleted < 1<<63-1 {
					deleted++
				}
			}
			if ev, err := c.watchEvents(ctx); err == nil {
				mu.Lock()
				samples = append(samples, sample{created: len(keys), released: deleted, events: ev})
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	began := time.Now()
	// The first holders wait for the gate until every job is queued, so the queue is long
	// when the releases begin, whatever the machine's load.
	gate := s.name + "-gate"
	for i := range jobs {
		s.job(i%clusterSize, []string{"--wait", "5m"}, "-gate", histMount+"/"+gate, "-hold", fmt.Sprintf("%dms", 100+rand.IntN(300)))
	}
	s.waitFor("every job's key", func() bool { return s.keys() == jobs })
	// Until every job is queued, 200 conch processes start at once on 2 shared cores: the
	// first holders' child starts then measure the machine, so idle slots count from here.
	opened := monoNow()
	if err := os.WriteFile(filepath.Join(c.hist, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wantAllDone()
	stop()
	wg.Wait()
	t.Logf("scenario 9: %d jobs on 3 nodes done in %v", jobs, ms(time.Since(began)))
	r := s.verify(checkSpec{Handoff: handoff, Settled: opened})
	t.Logf("scenario 9: the gate opened at +%v", ms(time.Duration(opened-r.Base)))
	if r.Children != jobs || r.MaxConcurrent != s.max {
		t.Errorf("%d children ran, at most %d at once; want %d, and %d at once", r.Children, r.MaxConcurrent, jobs, s.max)
	}
	long, short, ok := perRelease(samples, jobs)
	if !ok {
		t.Fatalf("too few metrics samples while the queue drained: %v", samples)
	}
	t.Logf("scenario 9: watch events sent per release: %.1f while the queue was long, %.1f while it was short", long, short)
	// Flat: a herd would scale with the queue (about 3x from the first window to the second).
	// 3 host watches and at most 2 woken waiters make ~10 per release.
	if long > 2*short+2 || long > 40 {
		t.Errorf("watch events per release grow with the queue: %.1f (long queue) vs %.1f (short)", long, short)
	}
}

// sample is one reading during scenario 9.
type sample struct {
	created, released int     // keys of the semaphore the host saw created / deleted so far
	events            float64 // etcd_debugging_mvcc_events_total, summed over the members
}

// perRelease returns the watch events per release from the sample when every key existed to
// the one at half the releases (long queue), and from there to 90 % of them (short queue).
func perRelease(ss []sample, jobs int) (long, short float64, ok bool) {
	var a, m, b *sample
	for i := range ss {
		x := &ss[i]
		switch {
		case x.created < jobs:
		case a == nil:
			a = x
		case m == nil && x.released >= jobs/2:
			m = x
		case m != nil && x.released <= jobs*9/10:
			b = x
		}
	}
	if a == nil || m == nil || b == nil || m.released <= a.released || b.released <= m.released {
		return 0, 0, false
	}
	long = (m.events - a.events) / float64(m.released-a.released)
	short = (b.events - m.events) / float64(b.released-m.released)
	return long, short, true
}

// watchEvents returns etcd_debugging_mvcc_events_total summed over the members' /metrics.
func (c *cluster) watchEvents(ctx context.Context) (float64, error) {
	cl := &http.Client{Transport: &http.Transport{DialContext: c.nw.Dial, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	sum := 0.0
	for i := range clusterSize {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.etcd.Endpoint(i)+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_events_total "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		_ = resp.Body.Close()
	}
	return sum, nil
}

// Scenario 8: the contrib timer and service (contrib/systemd/conch-maintenance.*) on all three
// nodes, made to fire at one moment with --max 1: exactly one runs the job, the others skip
// the round (75, SuccessExitStatus=75) and say so in the journal, and no timer or service unit
// is failed.
func testTimer(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s8-timer", 1)
	service := contribUnit(t, "conch-maintenance.service")
	timer := contribUnit(t, "conch-maintenance.timer")
	at := time.Now().UTC().Add(6 * time.Second).Truncate(time.Second)
	exec := fmt.Sprintf("ExecStart=%s sema %s --max 1 --nonblock --runtime-max 50m -- %s -dir %s -hold 2s", conch, s.name, histchild, histMount)
	service = replaceLine(t, service, "ExecStart=", exec)
	timer = replaceLine(t, timer, "OnCalendar=", "OnCalendar="+at.Format("2006-01-02 15:04:05")+" UTC\nAccuracySec=1us")
	timer = replaceLine(t, timer, "RandomizedDelaySec=", "RandomizedDelaySec=0")
	for i, n := range c.nodes {
		env := "[Service]\nEnvironment=CONCH_ENDPOINTS=" + strings.Join(c.etcd.Endpoints(i), ",") + "\n"
		for path, data := range map[string]string{
			"/etc/systemd/system/conch-maintenance.service":                  service,
			"/etc/systemd/system/conch-maintenance.timer":                    timer,
			"/etc/systemd/system/conch-maintenance.service.d/endpoints.conf": env,
		} {
			if err := n.WriteFile(s.ctx, path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"daemon-reload"}, {"start", "conch-maintenance.timer"}} {
			if _, err := n.Systemctl(s.ctx, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			_, _ = n.Systemctl(context.Background(), "stop", "conch-maintenance.timer", "conch-maintenance.service")
		}
	})
	results, verdicts := map[string]int{}, map[string]string{}
	s.waitFor("the service to have run on every node", func() bool {
		for _, n := range c.nodes {
			m, err := n.Show(s.ctx, "conch-maintenance.service", "ActiveState", "ExecMainExitTimestampMonotonic", "ExecMainStatus", "Result")
			if err != nil || m["ActiveState"] == "activating" || m["ExecMainExitTimestampMonotonic"] == "0" {
				return false
			}
			results[n.Name()], _ = strconv.Atoi(m["ExecMainStatus"])
			verdicts[n.Name()] = m["ActiveState"] + "/" + m["Result"]
		}
		return true
	})
	for name, v := range verdicts {
		if v != "inactive/success" {
			t.Errorf("conch-maintenance.service on %s: %s (exit %d), want inactive/success", name, v, results[name])
		}
	}
	ran, skipped := 0, 0
	for _, code := range results {
		switch code {
		case 0:
			ran++
		case 75:
			skipped++
		}
	}
	chs := s.children()
	t.Logf("scenario 8: timer fired at %s on 3 nodes: %d ran, %d skipped (75), exits %v; children %d", at.Format(time.TimeOnly), ran, skipped, results, len(chs))
	if ran != 1 || skipped != 2 || len(chs) != 1 {
		t.Errorf("%d ran and %d skipped, %d children; want exactly 1 run, 2 skipped, 1 child", ran, skipped, len(chs))
	}
	for _, n := range c.nodes {
		res, _ := n.Systemctl(s.ctx, "--failed", "--no-legend", "--plain", "list-units", "conch-maintenance.*")
		if out := strings.TrimSpace(string(res.Stdout)); out != "" {
			t.Errorf("failed units on %s: %s", n.Name(), out)
		}
		if results[n.Name()] == 75 {
			j, _ := n.Nsenter(s.ctx, "journalctl", "--no-pager", "-q", "-u", "conch-maintenance.service")
			if !strings.Contains(string(j.Stdout), s.name) {
				t.Errorf("the journal of the skipped run on %s does not name %s:\n%s", n.Name(), s.name, j.Stdout)
			}
		}
	}
	s.verify(checkSpec{Handoff: handoff})
}

// contribUnit returns a unit file of contrib/systemd.
func contribUnit(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "contrib", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// replaceLine replaces the line of unit that starts with prefix by line.
func replaceLine(t *testing.T, unit, prefix, line string) string {
	t.Helper()
	lines := strings.Split(unit, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = line
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no line %s... in the unit:\n%s", prefix, unit)
	return ""
}
