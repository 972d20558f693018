package slotrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The test binary is also the child's guardian: unitrun re-executes it with GuardianArg (D7).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == unitrun.GuardianArg {
		os.Exit(unitrun.GuardianMain())
	}
	os.Exit(m.Run())
}

// recorder is a Reporter that keeps what it is told, in order; safe from any goroutine.
type recorder struct {
	mu   sync.Mutex
	said []string
	pid  chan int
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said = append(r.said, fmt.Sprintf(format, args...))
}
func (r *recorder) Event(e sema.Event)                     { r.add("event %d", e.Kind) }
func (r *recorder) Stopping(cause error)                   { r.add("stopping") }
func (r *recorder) Released(status int, _ time.Duration)   { r.add("released %d", status) }
func (r *recorder) HeldAfter(_ sema.HeldAfter, status int) { r.add("held after %d", status) }
func (r *recorder) Skipped(fleet.OnceMarker)               { r.add("skipped") }
func (r *recorder) Note(n Note)                            { r.add("note %d %v", n.Kind, n.Err) }
func (r *recorder) Started(pid int, scope string) {
	r.add("started %q", scope)
	r.pid <- pid
}

// all is everything told, one line each.
func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.said, "\n")
}

// config runs script under sh in a slot of name[1] on srv, directly (no scope), with the
// test's stdio.
func config(srv *etcdtest.Server, name, script string) Config {
	return Config{
		Name: name, Max: 1, Path: "/bin/sh", Args: []string{"sh", "-c", script},
		Env:   []string{"PATH=/usr/bin:/bin"},
		Stdio: unitrun.Spec{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr},
		Plan:  unitrun.Options{Mode: unitrun.ScopeNever},
		TTL:   5 * time.Second, ConnectTimeout: 5 * time.Second,
		Record: schema.Record{Host: "test", PID: os.Getpid()},
		Connect: func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second, Context: ctx})
		},
	}
}

// A run holds the slot while its child runs with the slot's environment (D5), ends with the
// child's own status and releases the slot: no key is left.
func TestRunHoldsAndReleases(t *testing.T) {
	srv := etcdtest.Start(t)
	out := filepath.Join(t.TempDir(), "rev")
	rep := &recorder{pid: make(chan int, 1)}
	o, err := Run(context.Background(), config(srv, "hr", `echo "$CONCH_SEMA $CONCH_MAX $CONCH_REV" > `+out+`; exit 3`), rep)
	if err != nil || o.End != Ran || o.Result.ExitStatus != 3 {
		t.Fatalf("Run = %+v, %v; want Ran with status 3\n%s", o, err, rep.all())
	}
	got, _ := os.ReadFile(out)
	if f := strings.Fields(string(got)); len(f) != 3 || f[0] != "hr" || f[1] != "1" || f[2] == "0" {
		t.Errorf("the child's CONCH_SEMA, CONCH_MAX, CONCH_REV: %q", got)
	}
	if s := rep.all(); !strings.Contains(s, `started ""`) || !strings.HasSuffix(s, "released 3") {
		t.Errorf("told:\n%s\nwant the start in no scope, and the release with status 3 last", s)
	}
	if n := etcdtest.KeysUnder(t, srv.Client(t), schema.NamePrefix("hr")); n != 0 {
		t.Errorf("%d keys left after the run", n)
	}
}

// A slot lost while the child runs (its key deleted) stops the child (D7): the run ends Lost,
// with the loss as its cause, and says it is stopping.
func TestRunSlotLostStopsChild(t *testing.T) {
	srv := etcdtest.Start(t)
	rep := &recorder{pid: make(chan int, 1)}
	done := make(chan error, 1)
	var o Outcome
	go func() {
		var err error
		o, err = Run(context.Background(), config(srv, "lost", "sleep 60"), rep)
		done <- err
	}()
	select {
	case <-rep.pid:
	case <-time.After(60 * time.Second):
		t.Fatalf("the child did not start:\n%s", rep.all())
	}
	if _, err := srv.Client(t).Delete(context.Background(), schema.NamePrefix("lost"), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || o.End != Lost || !errors.Is(o.Cause, sema.ErrKeyDeleted) {
			t.Fatalf("Run = %+v, %v; want Lost by the key's deletion\n%s", o, err, rep.all())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the run did not end after its key was deleted:\n%s", rep.all())
	}
	if !strings.Contains(rep.all(), "stopping") {
		t.Errorf("told:\n%s\nwant stopping", rep.all())
	}
}

// With both a wait and a deadline, the earlier ends the wait: a 1 s wait is not lengthened
// by a deadline an hour away.
func TestRunWaitAndDeadline(t *testing.T) {
	srv := etcdtest.Start(t)
	holder, err := sema.New(srv.Client(t), "wd", 1, sema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := holder.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	cfg := config(srv, "wd", "exit 0")
	cfg.Wait, cfg.Rules.Deadline = time.Second, time.Now().Add(time.Hour)
	done := make(chan error, 1)
	rep := &recorder{pid: make(chan int, 1)}
	go func() { _, err := Run(context.Background(), cfg, rep); done <- err }()
	select {
	case err := <-done:
		var ns *NoSlotError
		if !errors.As(err, &ns) {
			t.Fatalf("Run = %v; want no slot\n%s", err, rep.all())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the 1 s wait did not end: the deadline an hour away replaced it\n%s", rep.all())
	}
}

// A run under a hold-after rule keeps its slot once the child exits (D13): the key stays,
// rewritten as held after the run, and its record no longer names a scope, since no process
// is left behind the slot (a listing must not look for one).
func TestRunHoldAfterDropsScope(t *testing.T) {
	srv := etcdtest.Start(t)
	rep := &recorder{pid: make(chan int, 1)}
	cfg := config(srv, "kept", "exit 0")
	cfg.Record.Scope = true // the record the holder wrote names its scope
	cfg.Rules.HoldAfter = time.Minute
	o, err := Run(context.Background(), cfg, rep)
	if err != nil || o.End != Ran || o.Result.ExitStatus != 0 {
		t.Fatalf("Run = %+v, %v; want Ran with status 0\n%s", o, err, rep.all())
	}
	if s := rep.all(); !strings.HasSuffix(s, "held after 0") {
		t.Errorf("told:\n%s\nwant the slot held after the run with status 0 last", s)
	}
	c := srv.Client(t)
	resp, err := c.Get(context.Background(), schema.NamePrefix("kept"), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys after the run: %v, %v; want the one slot kept", resp, err)
	}
	kv := resp.Kvs[0]
	rec := schema.DecodeRecord(kv.Value)
	if rec.Err != nil || !rec.IsHeldAfter() || rec.Scope || rec.Host != "test" {
		t.Errorf("kept slot's record = %+v; want held after the run, host kept, no scope", rec)
	}
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(kv.Lease))
	if err != nil || ttl.GrantedTTL != 60 {
		t.Errorf("kept slot's lease: %+v, %v; want granted for the hold's 60 s", ttl, err)
	}
}
