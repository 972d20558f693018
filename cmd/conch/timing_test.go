package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/conch-project/conch/unitrun"
)

// The stop grace is decided once, by unitrun's plan, from --kill-after as given (0 when unset)
// and -p TimeoutStopSec=: conch sends the run --kill-after as given and reads the effective
// value back from the plan (D7).
func TestKillAfterDecidedOnce(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		given, eff time.Duration
	}{
		{nil, 0, unitrun.DefaultKillAfter},
		{[]string{"--kill-after", "2s"}, 2 * time.Second, 2 * time.Second},
		{[]string{"--kill-after", "2s", "-p", "TimeoutStopSec=7s"}, 2 * time.Second, 7 * time.Second},
	} {
		s := semaCmd{getenv: fixedEnv(nil), stderr: &bytes.Buffer{}, dashdash: true, command: []string{"true"}}
		args := append([]string{"sema", "x", "--max", "1", "--config", "/dev/null"}, tc.args...)
		if _, err := newParser(&globalOptions{}, &s).ParseArgs(args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		j, err := s.runJob(job{name: "x", max: 1})
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		cfg := j.runConfig(unitrun.Spec{})
		if eff := planTiming(t, cfg.Plan).KillAfter; cfg.Plan.KillAfter != tc.given || eff != tc.eff {
			t.Errorf("%q: run's %v, effective %v; want %v, %v", tc.args, cfg.Plan.KillAfter, eff, tc.given, tc.eff)
		}
	}
}

// planTiming is the stop timing unitrun's plan decides for opts (Plan.Timing), without
// touching systemd: the mode does not change the timing.
func planTiming(t *testing.T, opts unitrun.Options) unitrun.StopTiming {
	t.Helper()
	opts.Mode = unitrun.ScopeNever
	p := unitrun.StartPlan(t.Context(), opts)
	defer p.Close()
	return p.Timing()
}
