package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldChild starts `conch sema NAME --max 1 --scope=never -- sh` whose
// script traps SIGTERM (so it outlives conch's stop signal by the
// --kill-after grace, and marks its arrival in name.term), marks itself started (name.held), waits for the test
// to open its gate, then runs `pre conch sema --held` and records the
// status and stderr of that check in name.status and name.err.
func (e *env) heldChild(name, pre string) *proc {
	e.t.Helper()
	script := fmt.Sprintf(`trap "touch %[1]s.term" TERM; touch %[1]s.held; while [ ! -e %[1]s.go ]; do sleep 0.02; done; %[2]s %[3]s sema --held 2>%[1]s.err; echo $? >%[1]s.status`,
		e.path(name), pre, conchBin)
	return e.start("sema", name, "--max", "1", "--scope=never", "--kill-after", "60s", "--", "sh", "-c", script)
}

// heldAnswer opens name's gate and returns the status and stderr of its
// `conch sema --held`.
func (e *env) heldAnswer(name string) (int, string) {
	e.t.Helper()
	e.open(name)
	var b []byte
	waitFor(e.t, name+"'s --held status", func() bool {
		var err error
		b, err = os.ReadFile(e.path(name + ".status"))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	st, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		e.t.Fatal(err)
	}
	msg, _ := os.ReadFile(e.path(name + ".err"))
	return st, string(msg)
}

// holderKV is the one key under NAME[1].
func (e *env) holderKV(name string) (key string, lease clientv3.LeaseID) {
	e.t.Helper()
	resp, err := e.c.Get(context.Background(), schema.Prefix(name, 1), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		e.t.Fatalf("holder key of %s: %v %v", name, resp, err)
	}
	return string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
}

// --held inside a real child: held; after its key was deleted by hand;
// after its lease was revoked; with a forged CONCH_REV.
func TestHeldInsideChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name, pre string
		spoil     func(key string, lease clientv3.LeaseID)
		status    int
		reason    string
	}{
		{"held-ok", "", nil, 0, ""},
		{"held-del", "", func(k string, _ clientv3.LeaseID) { e.c.Delete(context.Background(), k) }, 70, "key deleted"},
		{"held-rev", "", func(_ string, l clientv3.LeaseID) { e.c.Revoke(context.Background(), l) }, 70, "lease expired or revoked"},
		{"held-forged", `CONCH_REV=$((CONCH_REV+1000))`, nil, 70, "another revision"},
	}
	for _, tc := range cases {
		p := e.heldChild(tc.name, tc.pre)
		waitFor(t, tc.name+" holds", func() bool { return e.held(tc.name) })
		if tc.spoil != nil {
			tc.spoil(e.holderKV(tc.name))
			// conch stops the command on the loss, signalling every process of its tree once;
			// --held runs only after that, or the stop signal would end --held itself
			waitFor(t, tc.name+"'s stop signal", func() bool { return exists(e.path(tc.name + ".term")) })
		}
		st, msg := e.heldAnswer(tc.name)
		if st != tc.status || tc.reason != "" && !strings.Contains(msg, tc.reason) || tc.status == 0 && msg != "" {
			t.Fatalf("%s: --held exited %d saying %q, want %d with %q", tc.name, st, msg, tc.status, tc.reason)
		}
		if tc.status != 0 && !strings.Contains(msg, tc.name+"[max=1]") {
			t.Fatalf("%s: the line %q does not name the semaphore", tc.name, msg)
		}
		r := p.wait(t)
		t.Logf("%s: --held %d %q; conch %d", tc.name, st, strings.TrimSpace(msg), r.status)
	}
}

// --held outside a child: 64 with no name; with a name but no CONCH_*, 70;
// with the environment of a waiter's key, 70 "not within"; with a name that
// is not CONCH_SEMA's, 70; with etcd unreachable, 69.
func TestHeldOutsideChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("sema", "--held"); r.status != 64 || !strings.Contains(r.stderr, "not inside a command run by conch") {
		t.Fatalf("--held outside a child: %v", r)
	}
	if r := e.run("sema", "x", "--max", "1", "--held"); r.status != 70 || !strings.Contains(r.stderr, "not started by conch") {
		t.Fatalf("--held with a name outside a child: %v", r)
	}
	if r := e.run("sema", "--held", "--", "true"); r.status != 64 {
		t.Fatalf("--held with a command: %v", r)
	}
	h := e.start("sema", "wq", "--max", "1", "--", "sleep", "60")
	waitFor(t, "holder", func() bool { return e.keys(schema.Prefix("wq", 1)) == 1 })
	w := e.start("sema", "wq", "--max", "1", "--", "sleep", "60")
	waitFor(t, "waiter", func() bool { return e.keys(schema.Prefix("wq", 1)) == 2 })
	resp, err := e.c.Get(context.Background(), schema.Prefix("wq", 1), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	kv := resp.Kvs[1]
	vars := []string{"CONCH_SEMA=wq", "CONCH_MAX=1", "CONCH_LEASE=" + schema.FormatLeaseID(kv.Lease), "CONCH_REV=" + strconv.FormatInt(kv.CreateRevision, 10)}
	if r := e.startWith(vars, "sema", "--held").wait(t); r.status != 70 || !strings.Contains(r.stderr, "not within") {
		t.Fatalf("--held as the waiter: %v", r)
	}
	if r := e.startWith(vars, "sema", "other", "--max", "1", "--held").wait(t); r.status != 70 || !strings.Contains(r.stderr, "a slot of wq[max=1]") {
		t.Fatalf("--held naming another semaphore: %v", r)
	}
	if r := e.startWith([]string{"CONCH_SEMA=wq", "CONCH_MAX=1", "CONCH_LEASE=x", "CONCH_REV=1"}, "sema", "--held").wait(t); r.status != 64 {
		t.Fatalf("--held with a broken CONCH_LEASE: %v", r)
	}
	unreachable := []string{"sema", "--held", "--endpoints", "127.0.0.1:1", "--dial-timeout", "1s"}
	if r := e.startWith(vars, unreachable...).wait(t); r.status != 69 || !strings.Contains(r.stderr, "wq[max=1]: --held: ") {
		t.Fatalf("--held with etcd unreachable: %v, want 69 naming the slot", r)
	}
	h.cmd.Process.Kill()
	w.cmd.Process.Kill()
}

// D5b: a child's `conch sema --held` finds etcd the way its conch did: a --config given on
// conch's command line (here with no CONCH_ENDPOINTS nor CONCH_CONFIG in the environment)
// reaches the child as CONCH_CONFIG, as an absolute path, so the child's conch does not
// fall back to the default file (which a user may not be allowed to read) or endpoint.
func TestHeldUsesParentConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	conf := e.path("cluster.conf")
	if err := os.WriteFile(conf, []byte("[etcd]\nendpoints = "+e.srv.Endpoint+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, kv := range e.vars {
		if !strings.HasPrefix(kv, "CONCH_ENDPOINTS=") && !strings.HasPrefix(kv, "CONCH_CONFIG=") {
			vars = append(vars, kv)
		}
	}
	e.vars = vars
	script := fmt.Sprintf(`cd / && %s sema --held --dial-timeout 2s; echo $? >%s; printenv CONCH_CONFIG >%s`, conchBin, e.path("status"), e.path("env"))
	p := e.start("sema", "hcfg", "--max", "1", "--config", conf, "--scope=never", "--", "sh", "-c", script)
	if r := p.wait(t); r.status != 0 {
		t.Fatalf("conch --config: %v", r)
	}
	status, _ := os.ReadFile(e.path("status"))
	env, _ := os.ReadFile(e.path("env"))
	if strings.TrimSpace(string(status)) != "0" || strings.TrimSpace(string(env)) != conf {
		t.Fatalf("the child's conch sema --held: status %q, CONCH_CONFIG %q; want 0 and %s", status, env, conf)
	}
}
