package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/sema/schema"
)

// Bounds of the harness. A healthy scenario takes seconds; the margins are for a shared 2-core
// machine.
const (
	nodeTimeout = 3 * time.Minute // one subtest, boot included
	conch       = systemdtest.BinMount + "/conch"
	// stopMargin is the "+ 5 s" of the issue: after the trigger, a stopped child and its
	// descendants are gone within --kill-after plus this.
	stopMargin = 5 * time.Second
)

// env is what the subtests of one top-level test share: the conch binary and one etcd.
type env struct {
	bins string
	etcd *etcdtest.Server
	cli  *clientv3.Client
}

// newEnv builds conch (static, systemdtest.BuildBinaries) and starts etcd, both cleaned up
// when t ends. It logs how long that took.
func newEnv(t *testing.T) *env {
	t.Helper()
	began := time.Now()
	bins := systemdtest.BuildBinaries(t, "./cmd/conch")
	built := time.Since(began)
	srv := etcdtest.Start(t)
	e := &env{bins: bins, etcd: srv, cli: srv.Client(t)}
	t.Logf("setup: conch built in %v, etcd ready in %v", built.Round(time.Millisecond), (time.Since(began) - built).Round(time.Millisecond))
	return e
}

// node is one booted node of a subtest, with a connection to its system bus for assertions.
type node struct {
	*systemdtest.Node
	t   *testing.T
	e   *env
	ctx context.Context
	bus *sdbus.Conn
	dir string // a fresh directory in the node for the subtest's files
}

var nodeSeq struct {
	sync.Mutex
	n int
}

// boot boots a node for t, with conch at /opt/bin/conch.
func (e *env) boot(t *testing.T) *node {
	t.Helper()
	began := time.Now()
	n := systemdtest.Boot(t, systemdtest.Options{BinDir: e.bins})
	t.Logf("setup: node booted in %v", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	t.Cleanup(cancel)
	bus, err := n.DialBus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	nodeSeq.Lock()
	nodeSeq.n++
	dir := fmt.Sprintf("/var/tmp/t%d", nodeSeq.n)
	nodeSeq.Unlock()
	nd := &node{Node: n, t: t, e: e, ctx: ctx, bus: bus, dir: dir}
	nd.sh("mkdir -p " + dir)
	return nd
}

// env returns the environment conch gets in the node: only the etcd endpoint (D9).
func (n *node) env() []string {
	return []string{"CONCH_ENDPOINTS=" + n.e.etcd.Endpoint}
}

// service starts conch with args as the transient service unit (with the given systemd-run
// properties) and returns at once.
func (n *node) service(unit string, props []string, args ...string) *systemdtest.Proc {
	n.t.Helper()
	p, err := n.StartWith(n.ctx, systemdtest.RunOptions{Unit: unit, Properties: props, Env: n.env()},
		append([]string{conch}, args...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	return p
}

// loginShell starts conch with args in all of the node's namespaces with nsenter, outside any
// unit, as from a login shell, with a clean environment. The command ends when the test ends.
func (n *node) loginShell(args ...string) (*exec.Cmd, *bytes.Buffer) {
	n.t.Helper()
	argv := append([]string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, n.env()...)
	argv = append(argv, conch)
	cmd := n.NsenterCmd(n.ctx, append(argv, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, &out
}

// sh runs script in the node outside any unit and returns its stdout; it fails the test if the
// script fails.
func (n *node) sh(script string) string {
	n.t.Helper()
	res, err := n.Nsenter(n.ctx, "/bin/sh", "-c", script)
	if err != nil {
		n.t.Fatalf("sh -c %q: %v", script, err)
	}
	return string(res.Stdout)
}

// write writes a file in the node.
func (n *node) write(path, data string) {
	n.t.Helper()
	if err := n.WriteFile(n.ctx, path, []byte(data), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

// read returns a file of the node, trimmed, or "" if it does not exist.
func (n *node) read(path string) string {
	data, err := n.ReadFile(n.ctx, path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// await polls until the node file path has content, and returns it.
func (n *node) await(path string) string {
	n.t.Helper()
	var v string
	n.waitFor("content in "+path, func() bool {
		v = n.read(path)
		return v != ""
	})
	return v
}

// awaitPID polls until the node file path holds a PID and returns it.
func (n *node) awaitPID(path string) int {
	n.t.Helper()
	pid, err := strconv.Atoi(n.await(path))
	if err != nil || pid <= 0 {
		n.t.Fatalf("%s holds no PID: %v", path, err)
	}
	return pid
}

// waitFor polls cond until it holds; it fails the test when the subtest's time is up.
func (n *node) waitFor(what string, cond func() bool) {
	n.t.Helper()
	if err := systemdtest.WaitFor(n.ctx, what, func() (bool, error) { return cond(), nil }); err != nil {
		n.t.Fatal(err)
	}
}

// alive reports whether process pid of the node runs (a zombie counts as gone).
func (n *node) alive(pid int) bool {
	stat := n.read(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(stat, ')')
	return stat != "" && i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// allGone waits until none of pids runs in the node, failing the test if that takes longer
// than within from since; it returns how long it took.
func (n *node) allGone(since time.Time, within time.Duration, pids ...int) time.Duration {
	n.t.Helper()
	n.waitFor(fmt.Sprintf("processes %v to end", pids), func() bool {
		return !slices.ContainsFunc(pids, n.alive)
	})
	took := time.Since(since)
	if took > within {
		n.t.Errorf("processes %v ended %v after the trigger, want within %v", pids, took.Round(time.Millisecond), within)
	}
	return took
}

// scopes returns the conch scopes systemctl lists in the node.
func (n *node) scopes() []string {
	n.t.Helper()
	out := n.sh("systemctl list-units --all --plain --no-legend 'conch-sema-*'")
	var units []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units
}

// noScopeLeft waits (briefly: systemd collects a finished scope on its next loop) until no
// conch scope is loaded in the node.
func (n *node) noScopeLeft() {
	n.t.Helper()
	n.waitFor("no conch-sema-* scope left", func() bool { return len(n.scopes()) == 0 })
}

// show returns `systemctl show UNIT -p NAME...` as a map.
func (n *node) show(unit string, props ...string) map[string]string {
	n.t.Helper()
	m, err := n.Show(n.ctx, unit, props...)
	if err != nil {
		n.t.Fatalf("systemctl show %s: %v", unit, err)
	}
	return m
}

// holder is one key of a semaphore as etcd has it.
type holder struct {
	key   string
	rev   int64
	lease int64
	rec   schema.Record
}

// holders returns the keys under name[max] in revision order.
func (e *env) holders(t *testing.T, name string, max int) []holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.cli.Get(ctx, schema.Prefix(name, max), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var out []holder
	for _, kv := range resp.Kvs {
		h := holder{key: string(kv.Key), rev: kv.CreateRevision}
		if err := json.Unmarshal(kv.Value, &h.rec); err != nil {
			t.Fatalf("record under %s: %v", kv.Key, err)
		}
		out = append(out, h)
	}
	return out
}

// deleteKeys deletes the keys of name[max], as an operator would with etcdctl del.
func (e *env) deleteKeys(t *testing.T, name string, max int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.cli.Delete(ctx, schema.Prefix(name, max), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

// exitCode returns the exit status of a finished Proc (systemd-run passes the service's on).
func exitCode(t *testing.T, ctx context.Context, p *systemdtest.Proc) (int, string) {
	t.Helper()
	res, err := p.Wait(ctx)
	var ee *systemdtest.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", p.Unit(), err)
	}
	return res.ExitCode, string(res.Stderr)
}
