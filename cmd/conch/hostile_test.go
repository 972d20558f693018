package main

import (
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// An unreachable endpoint from ETCDCTL_ENDPOINTS is named
// with its source and its kind of failure (refused), exit 69 (D3).
func TestUnreachableNamesSourceAndKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var vars []string
	for _, kv := range e.vars {
		if !strings.HasPrefix(kv, "CONCH_ENDPOINTS=") {
			vars = append(vars, kv)
		}
	}
	unused := etcdtest.UnusedEndpoint(t)
	e.vars = append(vars, "ETCDCTL_ENDPOINTS="+unused, "CONCH_DIAL_TIMEOUT=1s")
	r := e.run("sema", "down", "--max", "1", "--", "true")
	for _, w := range []string{"from ETCDCTL_ENDPOINTS", unused + ": connection refused", "dial timeout 1s (from CONCH_DIAL_TIMEOUT)"} {
		if r.status != 69 || !strings.Contains(r.stderr, w) {
			t.Errorf("%v\nwant 69 and %q", r, w)
		}
	}
}

// D5a: the child gets no password from conch's variables,
// unless --keep-credentials-env.
func TestChildLosesCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no auth: etcd answers "auth not enabled", which clientv3 takes as no login needed
	e.vars = append(e.vars, "ETCDCTL_USER=bob:hunter2", "ETCDCTL_PASSWORD=hunter3", "CONCH_PASSWORD_FILE=")
	r := e.run("sema", "env", "--max", "1", "--", "env")
	if r.status != 0 || strings.Contains(r.stdout, "hunter") || !strings.Contains(r.stdout, "ETCDCTL_USER=bob\n") || strings.Contains(r.stdout, "ETCDCTL_PASSWORD") {
		t.Errorf("child's environment: %v", r)
	}
	r = e.run("sema", "env", "--max", "1", "--keep-credentials-env", "--", "env")
	if r.status != 0 || !strings.Contains(r.stdout, "ETCDCTL_USER=bob:hunter2\n") || !strings.Contains(r.stdout, "ETCDCTL_PASSWORD=hunter3\n") {
		t.Errorf("--keep-credentials-env: %v", r)
	}
}

// -q silences the "no free slot" line; the status stays 75 (or -E).
func TestQuietNoSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.start("sema", "quiet", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	if r := e.run("sema", "quiet", "--max", "1", "-n", "-q", "--", "true"); r.status != 75 || r.stderr != "" {
		t.Errorf("-n -q: %v, want 75 and nothing on stderr", r)
	}
	if r := e.run("sema", "quiet", "--max", "1", "--wait", "0.2", "--quiet", "-E", "3", "--", "true"); r.status != 3 || strings.Contains(r.stderr, "no slot") {
		t.Errorf("--wait 0.2 --quiet -E 3: %v, want 3 and no \"no slot\" line", r)
	}
	if r := e.run("sema", "quiet", "--max", "1", "-n", "--", "true"); r.status != 75 || !strings.Contains(r.stderr, "no free slot") {
		t.Errorf("-n without -q: %v", r)
	}
	e.open("h")
	h.wait(t)
}

// -q also drops the "waiting for ..., next in line" line, so a cron job with --wait
// that queued and then ran mails nothing; the child's own stderr is untouched, and warnings
// still print.
func TestQuietWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.start("sema", "quietw", "--max", "1", "--", "sh", "-c", e.gated("h"))
	waitFor(t, "holder", func() bool { return e.held("h") })
	w := e.start("sema", "quietw", "--max", "1", "-q", "--wait", "60", "--", "sh", "-c", "echo child-said >&2")
	waitFor(t, "the waiter's key", func() bool { return e.keys(schema.NamePrefix("quietw")) == 2 })
	o := e.start("sema", "quietw", "--max", "2", "--change-max", "-q", "--", "true") // another capacity on purpose (D17): a warning
	if r := o.wait(t); r.status != 0 || !strings.Contains(r.stderr, "WARNING: 2 key(s) exist for \"quietw\" under another --max") {
		t.Errorf("-q with keys under another --max: %v, want 0 and the warning", r)
	}
	e.open("h")
	h.wait(t)
	if r := w.wait(t); r.status != 0 || r.stderr != "child-said\n" {
		t.Errorf("-q --wait after queueing: %v, want 0 and only the child's line on stderr", r)
	}
	if r := e.run("sema", "quietw", "--max", "1", "-q", "-v", "--", "true"); r.status != exitUsage || !strings.Contains(r.stderr, "exclude each other") {
		t.Errorf("-q -v: %v, want 64", r)
	}
}
