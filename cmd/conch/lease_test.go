package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// One lease ID spelling everywhere, on a member whose lease
// IDs start with 0 (where an unpadded CONCH_LEASE named no key): the key's
// name, CONCH_LEASE, --who (text and JSON), the -v line and etcdctl's
// spelling (%016x, `etcdctl lease list`) are the same 16 digits.
func TestLeaseSpellingOneEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, etcdtest.StartZeroLeases(t))
	out := e.path("lease")
	p := e.start("sema", "z", "--max", "1", "-v", "--", "sh", "-c", "echo $CONCH_LEASE > "+out+".tmp; mv "+out+".tmp "+out+"; sleep 60")
	waitFor(t, "CONCH_LEASE", func() bool { return exists(out) })
	lease := strings.TrimSpace(readFile(t, out))
	if len(lease) != 16 || lease[0] != '0' {
		t.Fatalf("CONCH_LEASE=%q: want 16 hex digits starting with 0 on this member", lease)
	}
	resp, err := e.c.Get(t.Context(), schema.Prefix("z", 1)+lease)
	if err != nil || len(resp.Kvs) != 1 || schema.FormatLeaseID(resp.Kvs[0].Lease) != lease {
		t.Fatalf("no key named by CONCH_LEASE=%s, or bound to another lease: %v %v", lease, resp, err)
	}
	leases, err := e.c.Leases(t.Context())
	if err != nil || len(leases.Leases) != 1 || etcdctlSpelling(leases.Leases[0].ID) != lease {
		t.Fatalf("etcd's leases %+v (%v), want only %s", leases, err, lease)
	}
	recs, _ := e.whoJSON("z")
	if len(recs) != 1 || recs[0].Lease == nil || *recs[0].Lease != lease {
		t.Fatalf("--who --json lease %+v, want %s", recs, lease)
	}
	if r := e.run("sema", "z", "--who"); !slices.Contains(strings.Fields(r.stdout), "lease="+lease) { // ttl= follows it
		t.Fatalf("--who text: %v, want lease=%s", r, lease)
	}
	if !strings.Contains(p.stderr.String(), "lease="+lease+" ") {
		t.Fatalf("-v line %q, want lease=%s", p.stderr.String(), lease)
	}
}

// etcdctlSpelling is how etcdctl prints a lease ID (ctlv3's printers and
// lease commands: %016x).
func etcdctlSpelling(id clientv3.LeaseID) string { return fmt.Sprintf("%016x", id) }
