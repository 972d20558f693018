package unitrun

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// The stop timing is decided in one place from the Options: a scope property over the
// caller's value over the default (D7).
func TestEffectiveTiming(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		opts  Options
		props []string // -p assignments, parsed with ParseProperties
		want  StopTiming
	}{
		{"defaults", Options{}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter}},
		{"--kill-after and --runtime-max", Options{KillAfter: 2 * s, RuntimeMax: 10 * s}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 2 * s, KillAfterFrom: FromOptions, RuntimeMax: 10 * s, RuntimeMaxFrom: FromOptions}},
		{"negative values are the defaults", Options{KillAfter: -s, RuntimeMax: -s}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter}},
		{"-p over the flags", Options{KillAfter: 2 * s, RuntimeMax: 10 * s},
			[]string{"KillSignal=SIGINT", "TimeoutStopSec=7", "RuntimeMaxSec=5s"},
			StopTiming{StopSignal: syscall.SIGINT, StopSignalFrom: FromProperty, KillAfter: 7 * s, KillAfterFrom: FromProperty,
				RuntimeMax: 5 * s, RuntimeMaxFrom: FromProperty}},
		{"-p RuntimeMaxSec= alone", Options{KillAfter: 3 * s}, []string{"RuntimeMaxSec=1min"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 3 * s, KillAfterFrom: FromOptions, RuntimeMax: time.Minute, RuntimeMaxFrom: FromProperty}},
		{"RuntimeMaxSec=infinity lifts --runtime-max", Options{RuntimeMax: 10 * s}, []string{"RuntimeMaxSec=infinity"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter, RuntimeMaxFrom: FromProperty}},
		{"TimeoutStopSec=infinity", Options{}, []string{"TimeoutStopSec=infinity"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: math.MaxInt64, KillAfterFrom: FromProperty}},
		{"the last of a name wins", Options{}, []string{"TimeoutStopSec=1", "TimeoutStopSec=4"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 4 * s, KillAfterFrom: FromProperty}},
		{"other properties change nothing", Options{KillAfter: 2 * s}, []string{"MemoryMax=1G", "CPUQuota=50%", "RestartKillSignal=SIGINT"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 2 * s, KillAfterFrom: FromOptions}},
	}
	for _, tt := range tests {
		props, err := systemd.ParseProperties(tt.props)
		if err != nil {
			t.Fatalf("%s: systemd.ParseProperties(%q): %v", tt.name, tt.props, err)
		}
		if got := effectiveTiming(withProps(tt.opts, props)); got != tt.want {
			t.Errorf("%s: effectiveTiming = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// withProps returns opts with props.
func withProps(opts Options, props []sdbus.Property) Options {
	opts.Properties = props
	return opts
}

// A Plan decides its timing once, at StartPlan, reports it (Timing) and gives it to every spec
// it runs, directly or in a scope.
func TestPlanTiming(t *testing.T) {
	props, err := systemd.ParseProperties([]string{"TimeoutStopSec=9", "RuntimeMaxSec=3"})
	if err != nil {
		t.Fatal(err)
	}
	p := StartPlan(t.Context(), Options{Mode: ScopeNever, KillAfter: time.Second, Properties: props})
	defer p.Close()
	want := StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 9 * time.Second, KillAfterFrom: FromProperty,
		RuntimeMax: 3 * time.Second, RuntimeMaxFrom: FromProperty}
	if got := p.Timing(); got != want {
		t.Errorf("Timing = %+v, want %+v", got, want)
	}
	if got := p.scoped(Spec{Path: "/bin/true"}, ScopeUnit{Name: "x.scope"}); got.stop != want || got.scope != nil {
		t.Errorf("scoped spec: stop %+v, scope %+v; want %+v, direct", got.stop, got.scope, want)
	}
	scoped := &Plan{opts: Options{Properties: props}, timing: want, done: closedChan(), conn: &sdbus.Conn{}}
	if got := scoped.scoped(Spec{Path: "/bin/true"}, ScopeUnit{Name: "x.scope"}); got.stop != want || got.scope == nil {
		t.Errorf("scope mode: stop %+v, scope %+v; want %+v, a scope", got.stop, got.scope, want)
	}
}

// closedChan is a closed channel: a Plan's done once it is decided.
func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
