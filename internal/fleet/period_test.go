package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// D15: no marker at first; ClosePeriod's write (mark) makes one, fenced on our key, bound to
// a lease of the period, which the next holder reads with the node, the
// run's token and the time left; it is gone when the period ends. A holder
// whose key is gone writes none.
func TestOnceMarker(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := sematest.NewSem(t, c, "once", 1, sema.Options{})
	job := Job{Client: c, Name: "once", Max: 1, Rules: RunRules{OncePer: 2 * time.Second}}
	h := sematest.MustAcquire(t, s)
	if m, err := job.PeriodDone(t.Context(), h); err != nil || m != nil {
		t.Fatalf("PeriodDone before any run: %+v %v", m, err)
	}
	now := time.Now().UTC()
	if err := job.mark(t.Context(), h, schema.OnceRecord{Node: "n1", Start: now, End: now}); err != nil {
		t.Fatal(err)
	}
	rev := h.Rev()
	sematest.Release(t, h)
	h = sematest.MustAcquire(t, s)
	m, err := job.PeriodDone(t.Context(), h)
	if err != nil || m == nil || m.Node != "n1" || m.Rev != rev || m.Left <= 0 || m.Left > 2*time.Second || m.Err != nil {
		t.Fatalf("PeriodDone in the period: %+v %v", m, err)
	}
	polltest.Until(t, sematest.Timeout, "the marker to end with its period", func() bool {
		m, err = job.PeriodDone(t.Context(), h)
		return err == nil && m == nil
	})
	if _, err := c.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	if err := job.mark(t.Context(), h, schema.OnceRecord{Node: "n1", End: now}); !errors.Is(err, sema.ErrKeyDeleted) {
		t.Fatalf("mark with our key gone: %v, want ErrKeyDeleted", err)
	}
	if resp, err := c.Get(t.Context(), schema.OnceKey("once", 1)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("marker written by a holder that lost its key: %v %v", resp, err)
	}
	_ = h.Release(t.Context())
}

// D15 against a hand-written marker: garbage counts as present and says
// what it is; one without a lease has Left -1.
func TestOnceMarkerGarbage(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	if _, err := c.Put(t.Context(), schema.OnceKey("onceg", 1), "garbage"); err != nil {
		t.Fatal(err)
	}
	h := sematest.MustAcquire(t, sematest.NewSem(t, c, "onceg", 1, sema.Options{}))
	job := Job{Client: c, Name: "onceg", Max: 1, Rules: RunRules{OncePer: time.Hour}}
	defer sematest.Release(t, h)
	m, err := job.PeriodDone(t.Context(), h)
	if err != nil || m == nil || m.Err == nil || m.Raw != "garbage" || m.Left != -1 {
		t.Fatalf("PeriodDone of a garbage marker: %+v %v", m, err)
	}
}

// D15 through the rules: no period, no read; a failed run writes no marker; a successful one
// writes it with the job's node and the run's start, and the next holder
// finds the period done.
func TestOnceRunRules(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := sematest.NewSem(t, c, "once-rules", 1, sema.Options{Record: schema.Record{Host: "node-r", PID: 1}})
	job := Job{Client: c, Name: "once-rules", Max: 1, Rules: RunRules{OncePer: time.Minute}, Node: "node-r"}
	none := job
	none.Rules = RunRules{}
	h := sematest.MustAcquire(t, s)
	if m, err := none.PeriodDone(t.Context(), h); m != nil || err != nil {
		t.Fatalf("PeriodDone without a period: %+v %v", m, err)
	}
	if m, err := job.PeriodDone(t.Context(), h); m != nil || err != nil {
		t.Fatalf("PeriodDone before any run: %+v %v", m, err)
	}
	heldAt := time.Now()
	if marked, err := job.ClosePeriod(t.Context(), h, RunEnd{Started: true, Failed: true, HeldAt: heldAt}); marked || err != nil {
		t.Fatalf("ClosePeriod after a failed run: %v %v, want nothing written", marked, err)
	}
	if m, err := job.PeriodDone(t.Context(), h); m != nil || err != nil {
		t.Fatalf("PeriodDone after a failed run: %+v %v, want the period open", m, err)
	}
	if marked, err := job.ClosePeriod(t.Context(), h, RunEnd{Started: true, HeldAt: heldAt}); !marked || err != nil {
		t.Fatalf("ClosePeriod after a successful run: %v %v", marked, err)
	}
	rev := h.Rev()
	sematest.Release(t, h)
	h = sematest.MustAcquire(t, s)
	defer sematest.Release(t, h)
	m, err := job.PeriodDone(t.Context(), h)
	if err != nil || m == nil || m.Node != "node-r" || m.Rev != rev || !m.Start.Equal(heldAt.UTC().Truncate(time.Second)) || m.Left <= 0 {
		t.Fatalf("PeriodDone after a successful run: %+v %v", m, err)
	}
}
