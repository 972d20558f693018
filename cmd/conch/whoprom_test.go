package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// --who --format prometheus against a real queue: 2 holders and a waiter
// on --max 2, a pause key and a hand-written foreign key with a hostile
// name; --textfile writes the same atomically, leaving no temporary file.
func TestWhoPrometheus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var procs []*proc
	for i := range 3 {
		procs = append(procs, e.start("sema", "pm", "--max", "2", "--", "sleep", "60"))
		waitFor(t, "enqueue", func() bool { return e.keys(schema.Prefix("pm", 2)) == i+1 })
	}
	ctx := context.Background()
	if _, err := e.c.Put(ctx, schema.PauseRoot+"pm/2", `{"who":"op@n1","why":"incident \"42\""}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Put(ctx, schema.KeyRoot+"we\"ird\\na\nme/1/x", "{"); err != nil {
		t.Fatal(err)
	}
	r := e.run("sema", "--who", "--format", "prometheus")
	fams := whotest.ParseProm(t, r.stdout)
	for metric, v := range map[string]float64{"conch_sema_capacity": 2, "conch_sema_holders": 2, "conch_sema_waiters": 1, "conch_sema_paused": 1, "conch_sema_held_after": 0, "conch_sema_expiring_holders": 0} {
		if got := whotest.PromValue(fams, metric, "name", "pm", "max", "2"); got != v {
			t.Errorf("%s = %v, want %v\n%s", metric, got, v, r.stdout)
		}
	}
	if got := whotest.PromValue(fams, "conch_sema_foreign_keys", "name", "we\"ird\\na\nme"); got != 1 || r.status != 0 {
		t.Fatalf("foreign key metric %v, status %d\n%s", got, r.status, r.stdout)
	}
	path := filepath.Join(e.dir, "conch.prom")
	r = e.run("sema", "pm", "--max", "2", "--who", "--format", "prometheus", "--textfile", path)
	b, err := os.ReadFile(path)
	if err != nil || r.status != 0 || r.stdout != "" {
		t.Fatalf("--textfile: %v (%v)", r, err)
	}
	if got := whotest.PromValue(whotest.ParseProm(t, string(b)), "conch_sema_holders", "name", "pm", "max", "2"); got != 2 {
		t.Fatalf("textfile holders %v:\n%s", got, b)
	}
	if ents, _ := os.ReadDir(e.dir); len(ents) != 2 { // conch.conf and conch.prom
		t.Fatalf("temporary files left: %v", ents)
	}
	for _, args := range [][]string{{"--format", "prometheus"}, {"--who", "--textfile", path}, {"--who", "--json", "--format", "prometheus"}} {
		if r := e.run(append([]string{"sema", "pm"}, args...)...); r.status != 64 {
			t.Fatalf("%v: %v, want 64", args, r)
		}
	}
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	}
	if r := e.run("sema", "pm", "--who", "--format", "prometheus"); r.status != 1 {
		t.Fatalf("paused, no holder: %v, want 1", r)
	}
}
