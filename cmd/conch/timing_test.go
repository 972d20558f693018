package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/conch-project/conch/unitrun"
)

// The stop grace is decided once, by unitrun, from --kill-after as given (0 when unset) and
// -p TimeoutStopSec=; conch keeps the effective value unitrun reports, for its fence margin
// and messages, and sends the child's spec the value as given (D7).
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
		if j.run.killAfterGiven != tc.given || j.run.killAfter != tc.eff || cfg.KillAfter != tc.given {
			t.Errorf("%q: given %v, effective %v, run's %v; want %v, %v, %v", tc.args, j.run.killAfterGiven, j.run.killAfter,
				cfg.KillAfter, tc.given, tc.eff, tc.given)
		}
	}
}
