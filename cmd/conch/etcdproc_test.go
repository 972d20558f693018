package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/syncbuf"
)

// etcdProc is a real etcd binary on loopback that a test can SIGKILL and start again on the
// same data directory and ports, as an operator's restart or a crash does.
type etcdProc struct {
	t        *testing.T
	bin, dir string
	client   string // http://127.0.0.1:PORT
	peer     string
	token    string // --initial-cluster-token: with the member's name and peer URL it makes the cluster ID
	cmd      *exec.Cmd
	log      syncbuf.Buffer
}

var (
	etcdBinOnce sync.Once
	etcdBinPath string
	etcdBinErr  error
)

// etcdBinary builds the etcd server of go.mod once per test binary (Go's build cache makes
// it quick after the first time) and returns its path.
func etcdBinary(t *testing.T) string {
	t.Helper()
	etcdBinOnce.Do(func() {
		etcdBinPath = filepath.Join(filepath.Dir(conchBin), "etcd")
		out, err := exec.Command("go", "build", "-o", etcdBinPath, "go.etcd.io/etcd/server/v3").CombinedOutput()
		if err != nil {
			etcdBinErr = fmt.Errorf("go build etcd: %v\n%s", err, out)
		}
	})
	if etcdBinErr != nil {
		t.Fatal(etcdBinErr)
	}
	return etcdBinPath
}

// startEtcdProc starts a single-member etcd binary with fresh data and ports; Cleanup kills it.
func startEtcdProc(t *testing.T) *etcdProc {
	t.Helper()
	e := &etcdProc{t: t, bin: etcdBinary(t), dir: t.TempDir(),
		client: etcdtest.UnusedEndpoint(t), peer: etcdtest.UnusedEndpoint(t), token: "etcd-cluster"}
	e.start()
	t.Cleanup(e.kill)
	return e
}

// start starts the member on its data directory and waits until it answers.
func (e *etcdProc) start() {
	e.t.Helper()
	e.cmd = exec.Command(e.bin, "--name", "m", "--data-dir", e.dir, "--log-level", "error",
		"--listen-client-urls", e.client, "--advertise-client-urls", e.client,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "m="+e.peer, "--initial-cluster-token", e.token,
		"--listen-metrics-urls", etcdtest.UnusedEndpoint(e.t))
	e.cmd.Stdout, e.cmd.Stderr = &e.log, &e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	c := e.newClient()
	defer c.Close()
	waitFor(e.t, "etcd to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Get(ctx, "health")
		return err == nil
	})
}

// kill SIGKILLs the member, if it runs, and reaps it.
func (e *etcdProc) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGKILL)
		_ = e.cmd.Wait()
		e.cmd = nil
	}
}

// stop SIGSTOPs the member: it answers nothing, and closes no connection, until cont. A
// Cleanup continues it, so a test that fails meanwhile leaves no stopped etcd behind.
func (e *etcdProc) stop() {
	e.t.Helper()
	p := e.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Signal(syscall.SIGCONT) })
}

// cont SIGCONTs the member stopped by stop.
func (e *etcdProc) cont() {
	e.t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		e.t.Fatal(err)
	}
}

// stall is an etcd stall of d, the fault a test injects: stop, then during (nil for
// nothing: what the test does as the stall begins), then d with etcd stopped, then cont.
func (e *etcdProc) stall(d time.Duration, during func()) {
	e.t.Helper()
	e.stop()
	if during != nil {
		during()
	}
	time.Sleep(d) // the fault's length, not a wait for a condition
	e.cont()
}

// newClient is a client of the member; the caller closes it.
func (e *etcdProc) newClient() *clientv3.Client {
	e.t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// env is a conch environment on this member (no embedded server).
func (e *etcdProc) env(t *testing.T) *env {
	t.Helper()
	ev := &env{t: t, c: e.newClient(), dir: t.TempDir()}
	t.Cleanup(func() { ev.c.Close() })
	conf := filepath.Join(ev.dir, "conch.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, "CONCH_", "ETCDCTL_", "NOTIFY_SOCKET=") {
			ev.vars = append(ev.vars, kv)
		}
	}
	ev.vars = append(ev.vars, "CONCH_ENDPOINTS="+e.client, "CONCH_CONFIG="+conf)
	return ev
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}
