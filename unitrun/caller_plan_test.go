package unitrun

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// D8: ScopeNever decides at once, without systemd, for direct mode.
func TestStartPlanNever(t *testing.T) {
	p := StartPlan(t.Context(), Options{Mode: ScopeNever})
	defer p.Close()
	if !p.Decided() || p.Intent() {
		t.Fatalf("ScopeNever: decided %v, intent %v; want decided at once, no scope", p.Decided(), p.Intent())
	}
	if fallback, err := p.Wait(); err != nil || p.inScope() || fallback != nil {
		t.Fatalf("ScopeNever: plan in scope %v, fallback %v, error %v; want direct mode, no fallback", p.inScope(), fallback, err)
	}
	spec := Spec{Path: "/bin/true"}
	if got := p.scoped(spec, ScopeUnit{Name: "x.scope"}); got.scope != nil {
		t.Errorf("direct plan: scoped gave a scope %+v", got.scope)
	}
}

// scoped gives the plan's options and service to the scope the unit names, and the unit's
// Started replaces the spec's only then.
func TestPlanScoped(t *testing.T) {
	props := []sdbus.Property{memoryMax(1 << 20)}
	p := &Plan{opts: Options{Mode: ScopeAlways, Properties: props, Slice: "b.slice"}, conn: &sdbus.Conn{}, done: closedChan()}
	var which string
	spec := Spec{Path: "/bin/true", Started: func(int) { which = "spec" }}
	got := p.scoped(spec, ScopeUnit{Name: "u.scope", Description: "d", Started: func(int) { which = "unit" }})
	if got.scope == nil || got.scope.Name != "u.scope" || got.scope.Description != "d" || got.scope.Slice != "b.slice" ||
		len(got.scope.Properties) != 1 || got.scope.Conn != p.conn {
		t.Fatalf("scoped = %+v", got.scope)
	}
	got.Started(1)
	if which != "unit" {
		t.Errorf("Started in the scope called %s's hook, want the unit's", which)
	}
	p.scoped(spec, ScopeUnit{Name: "u.scope"}).Started(1)
	if which != "spec" {
		t.Errorf("without a unit hook, Started called %s's hook, want the spec's", which)
	}
}

func TestScopeModeString(t *testing.T) {
	for m, want := range map[ScopeMode]string{ScopeAuto: "auto", ScopeAlways: "always", ScopeNever: "never"} {
		if m.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(m), m.String(), want)
		}
	}
}

// D3a: the escalation is reported a grace after the stop began (ctx's end, or the runtime
// limit), and never once the run ended first.
func TestWatchEscalation(t *testing.T) {
	const grace = 10 * time.Millisecond
	for _, tc := range []struct {
		name      string
		t         StopTiming
		cancel    bool
		escalated bool
	}{
		{"stopped by ctx", StopTiming{KillAfter: grace}, true, true},
		{"runtime limit", StopTiming{KillAfter: grace, RuntimeMax: grace}, false, true},
		{"no stop", StopTiming{KillAfter: grace}, false, false},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		called := make(chan struct{}, 1)
		stop := tc.t.WatchEscalation(ctx, time.Now(), func() { called <- struct{}{} })
		if tc.cancel {
			cancel()
		}
		if tc.escalated {
			select {
			case <-called:
			case <-time.After(generousTimeout):
				t.Errorf("%s: no escalation reported", tc.name)
			}
		}
		stop()
		cancel()
		if !tc.escalated && len(called) != 0 {
			t.Errorf("%s: escalation reported without a stop", tc.name)
		}
	}
}

// The two ways in run a command with the plan's stop timing, decided once from the Options
// (D7): Options.RuntimeMax stops it (RuntimeExceeded, the stop signal SIGTERM) through
// Plan.Run, and through a Prestarter whose guardian was preloaded with the command's spec for
// the key named (the preloaded guardian runs it: the spec it got ahead is the one Run gives).
func TestPlanWaysIn(t *testing.T) {
	t.Parallel()
	p := StartPlan(t.Context(), Options{Mode: ScopeNever, RuntimeMax: 200 * time.Millisecond, KillAfter: time.Second})
	defer p.Close()
	path, err := Resolve("sleep")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Path: path, Args: []string{"sleep", "30"}, Env: []string{testPATH}}
	overran := func(way string, res Result, err error) {
		t.Helper()
		if err != nil || !res.Started || !res.RuntimeExceeded || res.Signal != syscall.SIGTERM {
			t.Fatalf("%s = %+v, %v; want stopped by SIGTERM at the plan's RuntimeMax", way, res, err)
		}
	}
	res, err := p.Run(t.Context(), spec, ScopeUnit{Name: "unused.scope"}, nil)
	overran("Plan.Run", res, err)

	ps := p.Prestart(Spec{})
	defer ps.Close()
	var asked atomic.Bool
	ps.PreloadWith(func(rev, lease int64) (Spec, ScopeUnit) {
		asked.Store(rev == 7 && lease == 9)
		return spec, ScopeUnit{Name: "unused.scope"}
	})
	ps.Want(true, 7, 9)
	waitFor(t, generousTimeout, "the preload of key 7", asked.Load)
	res, err = ps.Run(t.Context(), spec, ScopeUnit{Name: "unused.scope"}, nil)
	overran("Prestarter.Run", res, err)
	if ps.p == nil || ps.p.loaded == nil {
		t.Errorf("Prestarter.Run did not use the guardian preloaded with the command's spec")
	}
}
