package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// D18: etcd restarted on an empty data directory while a child that ignores SIGTERM holds
// the slot (--ttl 30s --kill-after 5s: the embedded etcd takes seconds to stop) and a waiter queues behind it. At its next keep-alive
// conch learns that etcd no longer knows its lease, long before the lease's deadline: the
// server may have handed the slot on already, so the child is killed at once (not after the
// 5 s grace) and conch exits 70 with a line that says etcd lost or rewound its state and what
// that means for CONCH_REV. The waiter re-enters on the new store and runs. The child had
// the cluster ID beside its token.
func TestEtcdStateLossKillsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	e := newEnv(t)
	p, child, waiter, idFile := e.deafHolderAndWaiter(t, "sl", "--", "true")
	if id, _ := os.ReadFile(idFile); strings.TrimSpace(string(id)) != schema.FormatClusterID(e.srv.ClusterID()) {
		t.Errorf("the child's CONCH_CLUSTER_ID = %q, want %s", id, schema.FormatClusterID(e.srv.ClusterID()))
	}
	tk := time.Now()
	e.srv.RestartEmpty(t)
	t0 := time.Now()
	t.Logf("etcd down and back empty in %v", t0.Sub(tk).Round(time.Millisecond))
	took := goneAfter(t, child, t0)
	t.Logf("child gone %v after etcd came back empty (--kill-after 5s)", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("child gone only %v after etcd lost its state: the grace was not skipped (D18)", took)
	}
	r := p.wait(t)
	if r.status != exitSlotLost || !strings.Contains(r.stderr, "etcd lost or rewound its state") ||
		!strings.Contains(r.stderr, "without the --kill-after grace") || !strings.Contains(r.stderr, "CONCH_REV") {
		t.Errorf("holder: %v\nwant %d and a line saying etcd lost or rewound its state, the child killed at once, and what it means for CONCH_REV", r, exitSlotLost)
	}
	if w := waiter.wait(t); w.status != 0 {
		t.Errorf("waiter: %v\nwant 0: it re-enters on the new store and runs", w)
	}
}

// deafHolderAndWaiter starts, on name[1], a holder whose child ignores SIGTERM (--ttl 30s
// --kill-after 5s: the grace that D18 skips) and a waiter behind it (--ttl 10s --wait 50s,
// then waiterArgs: more flags, "--" and its command), and returns once both keys are there:
// the holder, its child's PID, the waiter, and the file where the child wrote the
// CONCH_CLUSTER_ID it was given.
func (e *env) deafHolderAndWaiter(t *testing.T, name string, waiterArgs ...string) (holder *proc, child int, waiter *proc, clusterFile string) {
	t.Helper()
	pidFile, clusterFile := e.path(name+"-child"), e.path(name+"-cluster")
	holder = e.start("sema", name, "--max", "1", "--ttl", "30s", "--kill-after", "5s", "--scope=never", "--",
		"sh", "-c", `echo "$CONCH_CLUSTER_ID" > "$1"; echo $$ > "$0"; trap "" TERM; exec sleep 600`, pidFile, clusterFile)
	child = readPID(t, pidFile)
	waiter = e.start(append([]string{"sema", name, "--max", "1", "--ttl", "10s", "--wait", "50s", "--scope=never"}, waiterArgs...)...)
	waitFor(t, "the waiter's key", func() bool { return e.keys(schema.NamePrefix(name)) == 2 })
	return holder, child, waiter, clusterFile
}
