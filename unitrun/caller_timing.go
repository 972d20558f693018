package unitrun

import (
	"math"
	"syscall"
	"time"
)

// This file runs in the caller's process (conch): how a command will be stopped and limited.

// Defaults of the stop timing, applied to Options' zero values in one place (StartPlan); the
// caller learns the values in use from Plan.Timing.
const (
	// defaultStopSignal is the first signal sent to stop a command (D7).
	defaultStopSignal = syscall.SIGTERM

	// DefaultKillAfter is the grace period between the stop signal and SIGKILL (D7): the one
	// place its value is written (conch's help shows it from here).
	DefaultKillAfter = 5 * time.Second
)

// TimingSource says where a value of StopTiming came from.
type TimingSource int

const (
	// FromDefault: the package's default (defaultStopSignal, DefaultKillAfter, no runtime
	// limit), Options leaving the field at its zero value.
	FromDefault TimingSource = iota
	// FromOptions: the caller's Options (KillAfter, RuntimeMax).
	FromOptions
	// FromProperty: a scope property among the scopeSpec.Properties (KillSignal=,
	// TimeoutStopSec=, RuntimeMaxSec=), which wins over Options' field, in scope mode and directly alike (D8).
	FromProperty
)

// StopTiming is how a Plan's commands are stopped and limited (D7): the signal that stops
// them, the grace before SIGKILL, the runtime limit, and where each came from.
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

// effectiveTiming returns the stop signal, grace period and runtime limit of a Plan built
// with opts (StartPlan, Plan.Timing): a KillSignal, TimeoutStopSec or RuntimeMaxSec among
// opts.Properties wins over opts' KillAfter and RuntimeMax (the last one of a name wins, as in
// systemd), a field at its zero value (KillAfter <= 0) takes the package's default. It is pure
// and cannot fail; it is the one place where the stop timing is decided (D7).
func effectiveTiming(opts Options) StopTiming {
	t := StopTiming{StopSignal: defaultStopSignal, KillAfter: DefaultKillAfter}
	if opts.KillAfter > 0 {
		t.KillAfter, t.KillAfterFrom = opts.KillAfter, FromOptions
	}
	if opts.RuntimeMax > 0 {
		t.RuntimeMax, t.RuntimeMaxFrom = opts.RuntimeMax, FromOptions
	}
	for _, p := range opts.Properties {
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

// usecDuration converts systemd microseconds to a Duration, infinity (or anything too long)
// to the longest Duration.
func usecDuration(usec uint64) time.Duration {
	if usec >= math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(usec) * time.Microsecond
}
