package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sigdefault"
	"github.com/conch-project/conch/internal/syncbuf"
)

// These tests drive the built conch binary as a user would, against a real
// etcd (internal/etcdtest) on loopback.

const testTimeout = 60 * time.Second

var conchBin string

func TestMain(m *testing.M) {
	sigdefault.ForChildren() // conch gets SIGHUP and SIGINT as by default, even under nohup
	dir, err := os.MkdirTemp("", "conch-bin-")
	if err != nil {
		panic(err)
	}
	conchBin = filepath.Join(dir, "conch")
	out, err := exec.Command("go", "build", "-o", conchBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot build conch: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a clean environment for conch pointing at srv: no inherited
// CONCH_* or ETCDCTL_*, and an empty config file.
type env struct {
	t    *testing.T
	srv  *etcdtest.Server
	c    *clientv3.Client
	dir  string
	vars []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, etcdtest.Start(t))
}

// newEnvOn is newEnv on a server the test started itself.
func newEnvOn(t *testing.T, srv *etcdtest.Server) *env {
	t.Helper()
	e := &env{t: t, srv: srv, c: srv.Client(t), dir: t.TempDir()}
	conf := filepath.Join(e.dir, "conch.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") && !strings.HasPrefix(kv, "ETCDCTL_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			e.vars = append(e.vars, kv)
		}
	}
	e.vars = append(e.vars, "CONCH_ENDPOINTS="+srv.Endpoint, "CONCH_CONFIG="+conf)
	return e
}

type result struct {
	status int            // exit status, or -1 if killed by a signal
	signal syscall.Signal // signal that killed conch
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("status %d signal %v\nstdout: %s\nstderr: %s", r.status, r.signal, r.stdout, r.stderr)
}

type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	res    result
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
}

// start runs conch with args in the background; Cleanup kills it if still running.
func (e *env) start(args ...string) *proc {
	e.t.Helper()
	p, err := e.tryStart(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// tryStart is start without failing the test: it may be called off the test's goroutine.
func (e *env) tryStart(args ...string) (*proc, error) {
	p := &proc{cmd: exec.Command(conchBin, args...), done: make(chan struct{})}
	p.cmd.Env = e.vars
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := p.cmd.Wait()
		p.res = result{status: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.res.signal = ws.Signal()
			}
		}
		close(p.done)
	}()
	e.t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p, nil
}

// wait waits for conch to exit, failing the test after testTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(testTimeout):
		t.Fatalf("conch %q did not exit within %v\nstderr so far: %s", p.cmd.Args, testTimeout, p.stderr.String())
		return result{}
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run runs conch to completion.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.start(args...).wait(e.t)
}

// keys counts the keys under a prefix.
func (e *env) keys(prefix string) int {
	e.t.Helper()
	return int(etcdtest.KeysUnder(e.t, e.c, prefix))
}

// waitFor polls cond until it holds or testTimeout passes (polltest.Until, the tests' one
// polling helper).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	polltest.Until(t, testTimeout, what, cond)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		_, err = fmt.Sscanf(string(b), "%d", &pid)
		return err == nil && pid > 0
	})
	return pid
}
