package unitrun

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemd"
)

func TestEffectiveTiming(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		spec  Spec
		props []string // -p assignments, parsed with ParseProperties
		want  StopTiming
	}{
		{"defaults", Spec{}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter}},
		{"--kill-after and --runtime-max", Spec{KillAfter: 2 * s, RuntimeMax: 10 * s}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 2 * s, KillAfterFrom: FromSpec, RuntimeMax: 10 * s, RuntimeMaxFrom: FromSpec}},
		{"Spec's stop signal", Spec{StopSignal: syscall.SIGINT}, nil,
			StopTiming{StopSignal: syscall.SIGINT, StopSignalFrom: FromSpec, KillAfter: DefaultKillAfter}},
		{"negative values are the defaults", Spec{KillAfter: -s, RuntimeMax: -s}, nil,
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter}},
		{"-p over the flags", Spec{KillAfter: 2 * s, RuntimeMax: 10 * s},
			[]string{"KillSignal=SIGINT", "TimeoutStopSec=7", "RuntimeMaxSec=5s"},
			StopTiming{StopSignal: syscall.SIGINT, StopSignalFrom: FromProperty, KillAfter: 7 * s, KillAfterFrom: FromProperty,
				RuntimeMax: 5 * s, RuntimeMaxFrom: FromProperty}},
		{"-p RuntimeMaxSec= alone", Spec{KillAfter: 3 * s}, []string{"RuntimeMaxSec=1min"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 3 * s, KillAfterFrom: FromSpec, RuntimeMax: time.Minute, RuntimeMaxFrom: FromProperty}},
		{"RuntimeMaxSec=infinity lifts --runtime-max", Spec{RuntimeMax: 10 * s}, []string{"RuntimeMaxSec=infinity"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: DefaultKillAfter, RuntimeMaxFrom: FromProperty}},
		{"TimeoutStopSec=infinity", Spec{}, []string{"TimeoutStopSec=infinity"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: math.MaxInt64, KillAfterFrom: FromProperty}},
		{"the last of a name wins", Spec{}, []string{"TimeoutStopSec=1", "TimeoutStopSec=4"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 4 * s, KillAfterFrom: FromProperty}},
		{"other properties change nothing", Spec{KillAfter: 2 * s}, []string{"MemoryMax=1G", "CPUQuota=50%", "RestartKillSignal=SIGINT"},
			StopTiming{StopSignal: syscall.SIGTERM, KillAfter: 2 * s, KillAfterFrom: FromSpec}},
	}
	for _, tt := range tests {
		props, err := systemd.ParseProperties(tt.props)
		if err != nil {
			t.Fatalf("%s: systemd.ParseProperties(%q): %v", tt.name, tt.props, err)
		}
		if got := EffectiveTiming(tt.spec, props); got != tt.want {
			t.Errorf("%s: EffectiveTiming = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Run takes its timing from EffectiveTiming: the scope's properties in scope mode only.
func TestSpecWithTiming(t *testing.T) {
	props, err := systemd.ParseProperties([]string{"TimeoutStopSec=9", "RuntimeMaxSec=3"})
	if err != nil {
		t.Fatal(err)
	}
	direct := Spec{KillAfter: time.Second}.withTiming()
	if direct.KillAfter != time.Second || direct.StopSignal != syscall.SIGTERM || direct.RuntimeMax != 0 {
		t.Errorf("direct mode: %+v", direct)
	}
	scoped := Spec{KillAfter: time.Second, Scope: &ScopeSpec{Properties: props}}.withTiming()
	if scoped.KillAfter != 9*time.Second || scoped.RuntimeMax != 3*time.Second {
		t.Errorf("scope mode: KillAfter %v, RuntimeMax %v; want 9s, 3s", scoped.KillAfter, scoped.RuntimeMax)
	}
}

func TestTimingSourceString(t *testing.T) {
	for s, want := range map[TimingSource]string{FromDefault: "default", FromSpec: "spec", FromProperty: "property"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", s, got, want)
		}
	}
}
