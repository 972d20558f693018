package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// D6g: keys bound to no lease are not conch's, so a run says nothing of them as jobs "run the
// other way" (D11) or as another capacity (D17), and is not refused for them. Here an operator
// wrote keys by hand: one named like a node and one named like a lease under the run's own
// capacity (they take two of its three slots), then one under another capacity. Before the
// fix a plain run warned of a job run with --spread, a --spread run of a job run without,
// and with the third key every run was refused (64) as if max=5 were live.
func TestRunBesideLeaselessKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(schema.Prefix("ll", 3)+"node-x", "by hand", 0)
	e.put(schema.Prefix("ll", 3)+schema.FormatLeaseID(7), "by hand", 0)
	runs := [][]string{
		{"sema", "ll", "--max", "3", "--nonblock", "--", "true"},
		{"sema", "ll", "--max", "3", "--nonblock", "--spread", "--node", "node-a", "--", "true"},
	}
	check := func(beside string) {
		t.Helper()
		for _, args := range runs {
			r := e.run(args...)
			if r.status != 0 || strings.Contains(r.stderr, "other way") || strings.Contains(r.stderr, "another --max") ||
				strings.Contains(r.stderr, "live with") {
				t.Errorf("%v beside %s: %v; want 0 and no warning of other jobs", args, beside, r)
			}
		}
	}
	check("keys bound to no lease in its queue")
	e.put(schema.Prefix("ll", 5)+"node-y", "by hand", 0)
	check("a key bound to no lease under another capacity")
}

// D6g in the listing: a key named like a node but bound to no lease is flagged no-lease and
// is not a node key conch wrote, so its JSON record does not say "spread": true (it did,
// sending an operator after a --spread job that never ran).
func TestWhoLeaselessNodeKeyNotSpread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(schema.Prefix("lj", 1)+"zzz", "hello", 0)
	r := e.run("sema", "lj", "--max", "1", "--who", "--json")
	var recs []struct {
		Kind   string   `json:"kind"`
		Spread bool     `json:"spread"`
		Flags  []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || r.status != 0 || len(recs) != 1 {
		t.Fatalf("--who --json: %v (%v); want 0 and one record", r, err)
	}
	if rec := recs[0]; rec.Spread || !slices.Contains(rec.Flags, "no-lease") {
		t.Errorf("record %+v: want spread false and the no-lease flag", rec)
	}
}
