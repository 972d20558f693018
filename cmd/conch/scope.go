package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/unitrun"
)

// scopeModeOf maps --scope's values (scopeModes; go-flags has checked them) to unitrun's.
var scopeModeOf = map[string]unitrun.ScopeMode{
	"auto":   unitrun.ScopeAuto,
	"always": unitrun.ScopeAlways,
	"never":  unitrun.ScopeNever,
}

// scopeFlags are --scope, -p and --slice, checked before any etcd call (D8), as unitrun's
// options for the child's scope (runConfig adds the stop timing flags).
type scopeFlags struct {
	opts unitrun.Options // -p or --slice make the mode ScopeAlways
}

// parseScopeFlags checks --scope, -p and --slice (D8): every -p against the table of
// scope-legal properties with typed values (systemd.ParseProperties), --slice as a slice
// name. A usage error (64) for anything refused, or for -p/--slice with --scope=never.
func parseScopeFlags(mode string, props []string, slice string) (scopeFlags, error) {
	var f scopeFlags
	m := scopeModeOf[mode] // "": auto
	f.opts.Mode = m
	if len(props) > 0 || slice != "" {
		if m == unitrun.ScopeNever {
			return f, usagef("-p/--property and --slice need a scope: they cannot go with --scope=never")
		}
		f.opts.Mode = unitrun.ScopeAlways
	}
	parsed, err := systemd.ParseProperties(props)
	if err != nil {
		if slices.ContainsFunc(props, func(p string) bool { return strings.HasPrefix(p, "Slice=") }) {
			return f, usagef("-p: %v (use --slice)", err)
		}
		return f, usagef("-p: %v", err)
	}
	f.opts.Properties = parsed
	if slice != "" {
		if f.opts.Slice, err = systemd.SliceName(slice); err != nil {
			return f, usagef("--slice: %v", err)
		}
	}
	return f, nil
}

// runtimeLimit names the run-time limit that stopped the child, for the line of exit 124, as
// the user gave it: "-p RuntimeMaxSec=5s" when it came from -p (in a scope it wins over
// --runtime-max), else "--runtime-max 10s". t is the run's stop timing, as unitrun decided it
// (slotrun.Outcome.Timing).
func runtimeLimit(t unitrun.StopTiming) string {
	if t.RuntimeMaxFrom == unitrun.FromProperty {
		return fmt.Sprintf("-p RuntimeMaxSec=%v", t.RuntimeMax)
	}
	return fmt.Sprintf("--runtime-max %v", t.RuntimeMax)
}
