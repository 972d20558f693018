package main

import (
	"context"
	"fmt"
	"github.com/conch-project/conch/internal/metrics"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdServer is the throw-away etcd the benchmarks run against, started by
// scripts/etcd-local.sh on free loopback ports, with its /metrics endpoint
// on a port of its own.
type etcdServer struct {
	pid      int
	endpoint string
	metrics  string
}

// startEtcd starts etcd through the team's script. The metrics port is
// chosen here (a port the kernel just handed out), so if etcd cannot bind
// it the whole start is retried with another.
func startEtcd(script, etcdBin, dir string) (*etcdServer, error) {
	var lastErr error
	for range 3 {
		mport, err := freePort()
		if err != nil {
			return nil, err
		}
		murl := fmt.Sprintf("http://127.0.0.1:%d", mport)
		cmd := exec.Command(script, etcdBin, dir, "--listen-metrics-urls", murl)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			lastErr = fmt.Errorf("%s: %v: %s", script, err, stderr.String())
			continue
		}
		s := &etcdServer{metrics: murl + "/metrics"}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "ETCD_PID="); ok {
				s.pid, _ = strconv.Atoi(v)
			}
			if v, ok := strings.CutPrefix(l, "ETCD_ENDPOINT="); ok {
				s.endpoint = v
			}
		}
		if s.pid == 0 || s.endpoint == "" {
			return nil, fmt.Errorf("%s printed no ETCD_PID/ETCD_ENDPOINT: %q", script, out)
		}
		if _, err := s.scrape(); err != nil {
			s.stop()
			lastErr = fmt.Errorf("etcd pid %d has no metrics at %s: %w", s.pid, murl, err)
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop sends SIGTERM to the etcd we started (by PID), then SIGKILL after 5 s.
func (s *etcdServer) stop() {
	_ = syscall.Kill(s.pid, syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(s.pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(s.pid, syscall.SIGKILL)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// client returns a new etcd client of the harness.
func (s *etcdServer) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{s.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// scrape reads the server's /metrics (see metrics.Scrape).
func (s *etcdServer) scrape() (metrics.Samples, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return metrics.Scrape(ctx, s.metrics)
}

// etcdCost is what the server's own counters say a window cost it.
type etcdCost struct {
	unary      map[string]float64 // unary requests handled, by method
	streams    map[string]float64 // streams started, by method
	msgsIn     map[string]float64 // stream messages received, by method
	msgsOut    map[string]float64 // stream messages sent, by method
	events     float64            // watch events sent
	bytesIn    float64
	bytesOut   float64
	unaryTotal float64
}

var costMethods = []string{"LeaseGrant", "Txn", "LeaseRevoke", "Range", "Put", "DeleteRange", "LeaseTimeToLive"}

func costOf(d metrics.Samples) etcdCost {
	c := etcdCost{unary: map[string]float64{}, streams: map[string]float64{}, msgsIn: map[string]float64{}, msgsOut: map[string]float64{}}
	for _, meth := range costMethods {
		c.unary[meth] = d.Sum("grpc_server_handled_total", `grpc_type="unary"`, `grpc_method="`+meth+`"`)
	}
	c.unaryTotal = d.Sum("grpc_server_handled_total", `grpc_type="unary"`)
	for _, meth := range []string{"Watch", "LeaseKeepAlive"} {
		c.streams[meth] = d.Sum("grpc_server_started_total", `grpc_method="`+meth+`"`)
		c.msgsIn[meth] = d.Sum("grpc_server_msg_received_total", `grpc_method="`+meth+`"`)
		c.msgsOut[meth] = d.Sum("grpc_server_msg_sent_total", `grpc_method="`+meth+`"`)
	}
	c.events = d.Sum("etcd_debugging_mvcc_events_total")
	c.bytesIn = d.Sum("etcd_network_client_grpc_received_bytes_total")
	c.bytesOut = d.Sum("etcd_network_client_grpc_sent_bytes_total")
	return c
}

// sub removes the harness's own unary requests (by method) from c.
func (c etcdCost) sub(own map[string]float64) etcdCost {
	for k, v := range own {
		c.unary[k] -= v
		c.unaryTotal -= v
	}
	return c
}

// gaugeSampler scrapes /metrics every interval in the background and keeps
// the values of one gauge, to show how often etcd had unsynced ("slow")
// watchers during a window: a watch created at a revision the store has
// already passed is caught up only by etcd's resync loop, every 100 ms.
type gaugeSampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples []float64
}

func (s *etcdServer) sampleGauge(name string, interval time.Duration) *gaugeSampler {
	g := &gaugeSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				if m, err := s.scrape(); err == nil {
					g.samples = append(g.samples, m.Sum(name))
				}
			}
		}
	}()
	return g
}

// end stops sampling; it returns the share of samples above zero and the
// largest sample.
func (g *gaugeSampler) end() (share, maxV float64) {
	close(g.stop)
	<-g.done
	n := 0
	for _, v := range g.samples {
		if v > 0 {
			n++
		}
		maxV = max(maxV, v)
	}
	if len(g.samples) == 0 {
		return 0, 0
	}
	return float64(n) / float64(len(g.samples)), maxV
}
