package fleet

import (
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
