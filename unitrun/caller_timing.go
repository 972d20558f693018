package unitrun

import (
	"math"
	"syscall"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// This file runs in the caller's process (conch): how a command will be stopped and limited.

// TimingSource says where a value of StopTiming came from.
type TimingSource int

const (
	// FromDefault: the package's default (DefaultStopSignal, DefaultKillAfter, no runtime
	// limit), Spec leaving the field at its zero value.
	FromDefault TimingSource = iota
	// FromSpec: Spec's own field (StopSignal, KillAfter, RuntimeMax).
	FromSpec
	// FromProperty: a scope property among the ScopeSpec.Properties (KillSignal=,
	// TimeoutStopSec=, RuntimeMaxSec=), which wins over Spec's field in scope mode (D8).
	FromProperty
)

// String names the source for messages: "default", "spec" or "property".
func (s TimingSource) String() string {
	switch s {
	case FromSpec:
		return "spec"
	case FromProperty:
		return "property"
	}
	return "default"
}

// StopTiming is how Run stops and limits a command (D7): the signal that stops it, the grace
// before SIGKILL, the runtime limit, and where each came from.
type StopTiming struct {
	StopSignal     syscall.Signal
	StopSignalFrom TimingSource
	// KillAfter is the grace between StopSignal and SIGKILL: the scope's TimeoutStopSec in
	// scope mode. TimeoutStopSec=infinity gives the longest Duration.
	KillAfter     time.Duration
	KillAfterFrom TimingSource
	// RuntimeMax is the runtime limit, 0 for none (also RuntimeMaxSec=infinity).
	RuntimeMax     time.Duration
	RuntimeMaxFrom TimingSource
}

// EffectiveTiming returns the stop signal, grace period and runtime limit Run uses for a
// command with spec's StopSignal, KillAfter and RuntimeMax (its other fields are ignored) when
// its scope has the properties props (ScopeSpec.Properties, from systemd.ParseProperties; nil in direct
// mode): a KillSignal, TimeoutStopSec or RuntimeMaxSec among props wins over spec's field (the
// last one of a name wins, as in systemd), a field at its zero value (KillAfter <= 0) takes the
// package's default. It is pure and cannot fail. A caller uses it to learn the grace its own
// deadlines must cover (D7) and to name the limit that stopped a child.
func EffectiveTiming(spec Spec, props []sdbus.Property) StopTiming {
	t := StopTiming{StopSignal: DefaultStopSignal, KillAfter: DefaultKillAfter}
	if spec.StopSignal != 0 {
		t.StopSignal, t.StopSignalFrom = spec.StopSignal, FromSpec
	}
	if spec.KillAfter > 0 {
		t.KillAfter, t.KillAfterFrom = spec.KillAfter, FromSpec
	}
	if spec.RuntimeMax > 0 {
		t.RuntimeMax, t.RuntimeMaxFrom = spec.RuntimeMax, FromSpec
	}
	for _, p := range props {
		switch v := p.Value.Value().(type) {
		case int32:
			if p.Name == "KillSignal" {
				t.StopSignal, t.StopSignalFrom = syscall.Signal(v), FromProperty
			}
		case uint64:
			switch p.Name {
			case "TimeoutStopUSec":
				t.KillAfter, t.KillAfterFrom = usecDuration(v), FromProperty
			case "RuntimeMaxUSec":
				t.RuntimeMax, t.RuntimeMaxFrom = usecDuration(v), FromProperty
				if v == math.MaxUint64 { // infinity
					t.RuntimeMax = 0
				}
			}
		}
	}
	return t
}

// withTiming returns a copy of s with the stop signal, grace period and runtime limit Run
// uses (EffectiveTiming, with the scope's properties in scope mode).
func (s Spec) withTiming() Spec {
	var props []sdbus.Property
	if s.Scope != nil {
		props = s.Scope.Properties
	}
	t := EffectiveTiming(s, props)
	s.StopSignal, s.KillAfter, s.RuntimeMax = t.StopSignal, t.KillAfter, t.RuntimeMax
	return s
}

// usecDuration converts systemd microseconds to a Duration, infinity (or anything too long)
// to the longest Duration.
func usecDuration(usec uint64) time.Duration {
	if usec >= math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(usec) * time.Microsecond
}
