package sema

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The run-side decisions, as pure functions of the rules and the run's end: a deadline at or
// before now has passed; only a successful run closes a period (D15); a run keeps its slot
// after however it ended, once started, unless the slot was lost (D13).
func TestRunRules(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		deadline time.Time
		passed   bool
	}{{time.Time{}, false}, {now.Add(time.Second), false}, {now, true}, {now.Add(-time.Hour), true}} {
		if got := (RunRules{Deadline: c.deadline}).DeadlinePassed(now); got != c.passed {
			t.Errorf("deadline %v at %v: passed %v, want %v", c.deadline, now, got, c.passed)
		}
	}
	fleet := RunRules{HoldAfter: time.Minute, OncePer: time.Hour}
	for _, c := range []struct {
		end          RunEnd
		closes, keep bool
	}{
		{RunEnd{Started: true}, true, true},
		{RunEnd{Started: true, Failed: true}, false, true},
		{RunEnd{Started: true, Lost: true}, false, false},
		{RunEnd{Started: true, Lost: true, Failed: true}, false, false},
		{RunEnd{}, false, false},
		{RunEnd{Failed: true}, false, false},
	} {
		if got := fleet.ClosesPeriod(c.end); got != c.closes {
			t.Errorf("ClosesPeriod(%+v) = %v, want %v", c.end, got, c.closes)
		}
		if got := fleet.KeepsSlot(c.end); got != c.keep {
			t.Errorf("KeepsSlot(%+v) = %v, want %v", c.end, got, c.keep)
		}
		if (RunRules{}).ClosesPeriod(c.end) || (RunRules{}).KeepsSlot(c.end) {
			t.Errorf("the zero rules close a period or keep a slot for %+v", c.end)
		}
	}
}

// D15 through the rules: no period, no read; a failed run writes no marker; a successful one
// writes it with the node of the semaphore's record and the run's start, and the next holder
// finds the period done.
func TestOnceRunRules(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "once-rules", 1, Options{Record: Record{Host: "node-r", PID: 1}})
	rules := RunRules{OncePer: time.Minute}
	h := mustAcquire(t, s)
	if m, err := h.PeriodDone(t.Context(), RunRules{}); m != nil || err != nil {
		t.Fatalf("PeriodDone without a period: %+v %v", m, err)
	}
	if m, err := h.PeriodDone(t.Context(), rules); m != nil || err != nil {
		t.Fatalf("PeriodDone before any run: %+v %v", m, err)
	}
	heldAt := time.Now()
	if marked, err := h.ClosePeriod(t.Context(), rules, RunEnd{Started: true, Failed: true, HeldAt: heldAt}); marked || err != nil {
		t.Fatalf("ClosePeriod after a failed run: %v %v, want nothing written", marked, err)
	}
	if m, err := h.PeriodDone(t.Context(), rules); m != nil || err != nil {
		t.Fatalf("PeriodDone after a failed run: %+v %v, want the period open", m, err)
	}
	if marked, err := h.ClosePeriod(t.Context(), rules, RunEnd{Started: true, HeldAt: heldAt}); !marked || err != nil {
		t.Fatalf("ClosePeriod after a successful run: %v %v", marked, err)
	}
	rev := h.Rev()
	release(t, h)
	h = mustAcquire(t, s)
	defer release(t, h)
	m, err := h.PeriodDone(t.Context(), rules)
	if err != nil || m == nil || m.Node != "node-r" || m.Rev != rev || !m.Start.Equal(heldAt.UTC().Truncate(time.Second)) || m.Left <= 0 {
		t.Fatalf("PeriodDone after a successful run: %+v %v", m, err)
	}
}

// D13 through the rules: a lost slot is not kept (the caller releases); a run that started
// keeps it, with the semaphore's record less its scope; a key no longer ours ends the
// holding with the error and no key.
func TestHoldAfterRunRules(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	s := newSem(t, c, "hold-rules", 2, Options{Record: Record{Host: "node-k", PID: 7, Scope: true}})
	rules := RunRules{HoldAfter: time.Minute}
	h := mustAcquire(t, s)
	if ended, _, err := h.KeepAfter(t.Context(), rules, RunEnd{Started: true, Lost: true}); ended || err != nil {
		t.Fatalf("KeepAfter of a lost slot: ended %v, %v; want the caller to release", ended, err)
	}
	ended, ha, err := h.KeepAfter(t.Context(), rules, RunEnd{Started: true, Failed: true})
	if !ended || err != nil || ha.Node != "node-k" || ha.TTL != time.Minute {
		t.Fatalf("KeepAfter of a failed run: ended %v, %+v, %v", ended, ha, err)
	}
	r, rev, _, ok := heldKV(t, c, h.Key())
	if !ok || rev != h.Rev() || !r.IsHeldAfter() || r.Host != "node-k" || r.PID != 7 || r.Scope {
		t.Fatalf("kept key: ok %v rev %d record %+v", ok, rev, r)
	}
	h2 := mustAcquire(t, s)
	if _, err := c.Delete(t.Context(), h2.Key()); err != nil {
		t.Fatal(err)
	}
	ended, ha, err = h2.KeepAfter(t.Context(), rules, RunEnd{Started: true})
	if !ended || !errors.Is(err, ErrKeyDeleted) || ha.Key != "" {
		t.Fatalf("KeepAfter of a deleted key: ended %v, %+v, %v; want ended, ErrKeyDeleted, no key", ended, ha, err)
	}
	if _, err := ReleaseHeld(t.Context(), c, "hold-rules", 2, "node-k"); err != nil {
		t.Fatal(err)
	}
}

// ParseDeadline, with the clock injected: RFC 3339 as given (past included), HH:MM[:SS] the
// next such local time: later today, or tomorrow when already passed, across midnight; bad
// spellings refused.
func TestParseDeadline(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 12, 1, 23, 59, 30, 0, loc)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "2026-12-01T22:00:00Z", want: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}, // past: the caller decides
		{in: "2026-12-02T00:00:30+01:00", want: time.Date(2026, 12, 2, 0, 0, 30, 0, loc)}, // in a minute
		{in: "00:30", want: time.Date(2026, 12, 2, 0, 30, 0, 0, loc)},                     // across midnight
		{in: "23:59:45", want: time.Date(2026, 12, 1, 23, 59, 45, 0, loc)},                // later today
		{in: "23:59:30", want: time.Date(2026, 12, 2, 23, 59, 30, 0, loc)},                // now: the next one
		{in: "23:59", want: time.Date(2026, 12, 2, 23, 59, 0, 0, loc)},                    // just passed: tomorrow
		{in: " 06:00 ", want: time.Date(2026, 12, 2, 6, 0, 0, 0, loc)},                    // blanks
		{in: "0001-01-01T00:00:00Z", want: time.Unix(0, 0)},                               // Go's zero time is a passed time, not "none"
		{in: "2026-12-31T23:59:59.5-08:00", want: time.Date(2026, 12, 31, 23, 59, 59, 5e8, time.FixedZone("", -8*3600))},
		{in: "24:00", bad: true}, {in: "7:00", bad: true}, {in: "07:60", bad: true}, {in: "07:00:61", bad: true},
		{in: "07", bad: true}, {in: "07:00:00:00", bad: true}, {in: "-1:00", bad: true}, {in: "", bad: true},
		{in: "2026-12-01 22:00:00", bad: true}, {in: "2026-12-01T22:00:00", bad: true}, {in: "tomorrow", bad: true},
	} {
		got, err := ParseDeadline(c.in, now)
		if (err != nil) != c.bad || !c.bad && !got.Equal(c.want) {
			t.Errorf("ParseDeadline(%q) = %v, %v; want %v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
	if _, err := ParseDeadline(string(make([]byte, 500)), now); err == nil || len(err.Error()) > 160 {
		t.Errorf("a long bad time: %v, want a short error", err)
	}
}

// SlotFromEnv: nothing set is ErrNoSlotEnv; a full slot reads back; each bad variable is
// named; Of matches a name and a capacity, either left open.
func TestSlotFromEnv(t *testing.T) {
	good := map[string]string{EnvName: "job", EnvMax: "2", EnvLease: FormatLeaseID(0x1f), EnvRev: "42"}
	env := func(m map[string]string, k, v string) func(string) string {
		return func(key string) string {
			if key == k {
				return v
			}
			return m[key]
		}
	}
	if _, err := SlotFromEnv(env(nil, "", "")); !errors.Is(err, ErrNoSlotEnv) {
		t.Errorf("empty environment: %v, want ErrNoSlotEnv", err)
	}
	s, err := SlotFromEnv(env(good, "", ""))
	if err != nil || s != (Slot{Name: "job", Max: 2, Lease: 0x1f, Rev: 42}) {
		t.Fatalf("SlotFromEnv: %+v %v", s, err)
	}
	for k, v := range map[string]string{EnvName: "", EnvMax: "0", EnvLease: "xyz", EnvRev: "-3"} {
		if _, err := SlotFromEnv(env(good, k, v)); err == nil || errors.Is(err, ErrNoSlotEnv) || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: %v, want an error naming it", k, v, err)
		}
	}
	if !s.Of("", 0) || !s.Of("job", 2) || !s.Of("job", 0) || s.Of("other", 0) || s.Of("job", 3) {
		t.Errorf("Of: wrong match for %+v", s)
	}
}
