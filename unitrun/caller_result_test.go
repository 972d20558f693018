package unitrun

import (
	"fmt"
	"syscall"
	"testing"
)

// The situations Run meets, each as the facts it records and the Result it must give.
func TestDecideResult(t *testing.T) {
	const term, kill = syscall.SIGTERM, syscall.SIGKILL
	exited := func(status int) endFacts { return endFacts{started: true, reported: true, status: status} }
	died := func(sig syscall.Signal) endFacts {
		return endFacts{started: true, reported: true, status: 128 + int(sig), signal: sig}
	}
	with := func(f endFacts, change func(*endFacts)) endFacts { change(&f); return f }
	tests := []struct {
		name  string
		facts endFacts
		want  Result
	}{
		{"guardian died before the start", endFacts{}, Result{ExitStatus: -1}},
		{"exec failure", endFacts{}, Result{ExitStatus: -1}},
		{"exec failure, ctx ended meanwhile", endFacts{asked: stopByContext}, Result{ExitStatus: -1}},
		{"exited on its own", exited(3), Result{Started: true, ExitStatus: 3}},
		{"died of a signal on its own", died(term), Result{Started: true, ExitStatus: 143, Signal: term}},
		{"stopped: ctx ended (direct)", with(died(term), func(f *endFacts) { f.asked = stopByContext }),
			Result{Started: true, ExitStatus: 143, Signal: term, Stopped: true}},
		{"ctx ended after it exited on its own", with(exited(0), func(f *endFacts) { f.asked, f.endedFirst = stopByContext, true }),
			Result{Started: true, ExitStatus: 0}},
		{"Run's runtime timer (direct)", with(died(term), func(f *endFacts) { f.asked = stopByRuntimeMax }),
			Result{Started: true, ExitStatus: 143, Signal: term, RuntimeExceeded: true}},
		{"runtime timer after it exited on its own", with(exited(1), func(f *endFacts) { f.asked, f.endedFirst = stopByRuntimeMax, true }),
			Result{Started: true, ExitStatus: 1}},
		{"guardian lost (direct), ctx stop", endFacts{started: true, asked: stopByContext},
			Result{Started: true, ExitStatus: -1, Stopped: true}},
		{"guardian lost (direct), runtime stop", endFacts{started: true, asked: stopByRuntimeMax},
			Result{Started: true, ExitStatus: -1, RuntimeExceeded: true}},
		{"guardian lost (direct), no stop", endFacts{started: true}, Result{Started: true, ExitStatus: -1}},
		{"scope: Run's stop through systemd", with(died(term), func(f *endFacts) { f.asked, f.systemdStop, f.scopeGone = stopByContext, true, true }),
			Result{Started: true, ExitStatus: 143, Signal: term, Stopped: true}},
		{"scope: systemd stopped it on its own", with(died(term), func(f *endFacts) { f.systemdStop, f.scopeGone = true, true }),
			Result{Started: true, ExitStatus: 143, Signal: term, ScopeStopped: true}},
		{"scope: RuntimeMaxSec fired before Run's timer", with(died(term), func(f *endFacts) { f.systemdStop, f.pastRuntimeMax = true, true }),
			Result{Started: true, ExitStatus: 143, Signal: term, RuntimeExceeded: true}},
		{"scope: RuntimeMaxSec, guardian missed the stop signal", with(died(term), func(f *endFacts) { f.pastRuntimeMax = true }),
			Result{Started: true, ExitStatus: 143, Signal: term, RuntimeExceeded: true}},
		{"scope: exited on its own past RuntimeMax", with(exited(0), func(f *endFacts) { f.pastRuntimeMax, f.endedFirst = true, true }),
			Result{Started: true, ExitStatus: 0}},
		{"scope: ctx stop past RuntimeMax is a ctx stop", with(died(term), func(f *endFacts) { f.asked, f.systemdStop, f.pastRuntimeMax = stopByContext, true, true }),
			Result{Started: true, ExitStatus: 143, Signal: term, Stopped: true}},
		{"scope: guardian SIGKILLed by systemd, scope gone", endFacts{started: true, systemdStop: true, guardianKilled: true, scopeGone: true},
			Result{Started: true, ExitStatus: 137, Signal: kill, ScopeStopped: true}},
		{"scope: guardian SIGKILLed without a stop signal, scope gone", endFacts{started: true, guardianKilled: true, scopeGone: true},
			Result{Started: true, ExitStatus: 137, Signal: kill}},
		{"scope: guardian SIGKILLed at RuntimeMaxSec's end", endFacts{started: true, guardianKilled: true, scopeGone: true, pastRuntimeMax: true},
			Result{Started: true, ExitStatus: 137, Signal: kill, RuntimeExceeded: true}},
		{"scope: Run's stop, guardian lost, scope gone", endFacts{started: true, asked: stopByContext, scopeGone: true},
			Result{Started: true, ExitStatus: 137, Signal: kill, Stopped: true}},
		{"scope: Run's stop, guardian lost, scope not confirmed gone", endFacts{started: true, asked: stopByContext},
			Result{Started: true, ExitStatus: -1, Stopped: true}},
		{"scope: guardian lost unasked, scope gone", endFacts{started: true, scopeGone: true}, Result{Started: true, ExitStatus: -1}},
		{"scope: guardian killed after reporting", with(exited(4), func(f *endFacts) { f.guardianKilled, f.scopeGone, f.endedFirst = true, true, true }),
			Result{Started: true, ExitStatus: 4}},
	}
	for _, tt := range tests {
		if got := decideResult(tt.facts); got != tt.want {
			t.Errorf("%s: decideResult(%+v) = %+v, want %+v", tt.name, tt.facts, got, tt.want)
		}
	}
}

// Every combination of the facts: the rules Result documents hold whatever the mix.
func TestDecideResultEveryCombination(t *testing.T) {
	n := 0
	for bits := range 1 << 8 {
		for _, asked := range []stopReason{notStopping, stopByContext, stopByRuntimeMax} {
			b := func(i int) bool { return bits&(1<<i) != 0 }
			f := endFacts{started: b(0), reported: b(1), endedFirst: b(2), systemdStop: b(3),
				pastRuntimeMax: b(4), guardianKilled: b(5), scopeGone: b(6), asked: asked}
			if f.reported {
				f.status = 0
				if b(7) {
					f.status, f.signal = 143, syscall.SIGTERM
				}
			}
			n++
			checkResultRules(t, f, decideResult(f))
		}
	}
	if n != 768 {
		t.Fatalf("%d combinations, want 768", n)
	}
}

func checkResultRules(t *testing.T, f endFacts, r Result) {
	t.Helper()
	fail := func(format string, a ...any) { t.Errorf("%+v -> %+v: %s", f, r, fmt.Sprintf(format, a...)) }
	verdicts := 0
	for _, v := range []bool{r.Stopped, r.RuntimeExceeded, r.ScopeStopped} {
		if v {
			verdicts++
		}
	}
	switch {
	case r.Started != f.started:
		fail("Started differs from the fact")
	case !f.started && verdicts > 0:
		fail("a command that never ran has a stop verdict")
	case verdicts > 1:
		fail("more than one of Stopped, RuntimeExceeded, ScopeStopped")
	case f.reported && (r.ExitStatus != f.status || r.Signal != f.signal):
		fail("a reported status is not kept")
	case !f.reported && r.ExitStatus != -1 && r.ExitStatus != 137:
		fail("an unreported status is neither unknown nor SIGKILL")
	case f.started && r.Stopped != (f.asked == stopByContext && !f.endedFirst):
		fail("Stopped is not exactly: ctx's stop while the command ran")
	case r.ScopeStopped && (!f.systemdStop || f.asked != notStopping):
		fail("ScopeStopped without systemd's own stop")
	case r.RuntimeExceeded && f.asked != stopByRuntimeMax && !f.pastRuntimeMax:
		fail("RuntimeExceeded with no runtime limit reached")
	case f.started && f.asked == stopByRuntimeMax && !f.endedFirst && !r.RuntimeExceeded:
		fail("Run's runtime stop of a running command not RuntimeExceeded")
	case !f.pastRuntimeMax && !f.systemdStop && !f.guardianKilled && !f.scopeGone && f.reported &&
		(r.ExitStatus != f.status || r.ScopeStopped):
		fail("direct mode: a scope fact changed the result")
	}
}
