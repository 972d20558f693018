package systemd

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// propParser turns the VALUE of -p NAME=VALUE into the D-Bus property to set.
type propParser func(name, value string) (sdbus.Property, error)

// scopeProps is the table of properties a transient scope accepts, by their unit-file names:
// systemd.scope(5) (RuntimeMaxSec...), systemd.resource-control(5) and systemd.kill(5), plus
// TimeoutStopSec, as systemd 252 takes them. Deprecated cgroup-v1 settings (CPUShares,
// MemoryLimit, BlockIO*), Slice (chosen apart: SliceName), and settings only services have are left out.
// It is built on first use, not at the process's start: the guardian (D7a) never needs it.
var scopeProps = sync.OnceValue(func() map[string]propParser {
	return map[string]propParser{
		// systemd.scope(5) and the stop timeout.
		"RuntimeMaxSec":             timespanProp("RuntimeMaxUSec", false),
		"RuntimeRandomizedExtraSec": timespanProp("RuntimeRandomizedExtraUSec", true),
		"TimeoutStopSec":            timespanProp("TimeoutStopUSec", false),

		// systemd.resource-control(5).
		"CPUAccounting":                 boolProp("CPUAccounting"),
		"MemoryAccounting":              boolProp("MemoryAccounting"),
		"IOAccounting":                  boolProp("IOAccounting"),
		"TasksAccounting":               boolProp("TasksAccounting"),
		"IPAccounting":                  boolProp("IPAccounting"),
		"CPUWeight":                     weightProp("CPUWeight"),
		"StartupCPUWeight":              weightProp("StartupCPUWeight"),
		"IOWeight":                      weightProp("IOWeight"),
		"StartupIOWeight":               weightProp("StartupIOWeight"),
		"CPUQuota":                      cpuQuotaProp,
		"CPUQuotaPeriodSec":             timespanProp("CPUQuotaPeriodUSec", false),
		"AllowedCPUs":                   cpuSetProp("AllowedCPUs"),
		"StartupAllowedCPUs":            cpuSetProp("StartupAllowedCPUs"),
		"AllowedMemoryNodes":            cpuSetProp("AllowedMemoryNodes"),
		"StartupAllowedMemoryNodes":     cpuSetProp("StartupAllowedMemoryNodes"),
		"MemoryMin":                     memoryProp("MemoryMin", true),
		"MemoryLow":                     memoryProp("MemoryLow", true),
		"MemoryHigh":                    memoryProp("MemoryHigh", false),
		"MemoryMax":                     memoryProp("MemoryMax", false),
		"MemorySwapMax":                 memoryProp("MemorySwapMax", true),
		"TasksMax":                      tasksMaxProp,
		"IODeviceWeight":                deviceProp("IODeviceWeight", parseWeight),
		"IODeviceLatencyTargetSec":      deviceProp("IODeviceLatencyTargetUSec", parseTimespan),
		"IOReadBandwidthMax":            deviceProp("IOReadBandwidthMax", parseRate),
		"IOWriteBandwidthMax":           deviceProp("IOWriteBandwidthMax", parseRate),
		"IOReadIOPSMax":                 deviceProp("IOReadIOPSMax", parseRate),
		"IOWriteIOPSMax":                deviceProp("IOWriteIOPSMax", parseRate),
		"DeviceAllow":                   deviceAllowProp,
		"DevicePolicy":                  enumProp("DevicePolicy", "auto", "closed", "strict"),
		"Delegate":                      delegateProp,
		"ManagedOOMSwap":                enumProp("ManagedOOMSwap", "auto", "kill"),
		"ManagedOOMMemoryPressure":      enumProp("ManagedOOMMemoryPressure", "auto", "kill"),
		"ManagedOOMMemoryPressureLimit": oomLimitProp,
		"ManagedOOMPreference":          enumProp("ManagedOOMPreference", "none", "avoid", "omit"),

		// systemd.kill(5). KillMode=process and none are refused: they would let the command's
		// other processes run on after the scope stops, without a slot (D7).
		"KillMode":          enumProp("KillMode", "control-group", "mixed"),
		"KillSignal":        signalProp("KillSignal"),
		"RestartKillSignal": signalProp("RestartKillSignal"),
		"FinalKillSignal":   signalProp("FinalKillSignal"),
		"WatchdogSignal":    signalProp("WatchdogSignal"),
		"SendSIGKILL":       boolProp("SendSIGKILL"),
		"SendSIGHUP":        boolProp("SendSIGHUP"),
	}
})

// ParseProperty parses one `-p NAME=VALUE` assignment as `systemd-run -p` would for a scope
// (D8) and returns the D-Bus property to pass to StartTransientUnit, with systemd's D-Bus name
// and type: CPUQuota=50% becomes CPUQuotaPerSecUSec=uint64 500000, RuntimeMaxSec=1min becomes
// RuntimeMaxUSec=uint64 60000000, MemoryMax=300M becomes MemoryMax=uint64 314572800 (and
// MemoryMax=50% becomes MemoryMaxScale, a uint32 fraction of physical memory, resolved by
// systemd), KillSignal=SIGINT or 2 becomes KillSignal=int32 2. Sizes, time spans, percentages
// and signals take systemd's syntax; "infinity" lifts a limit. Empty values (systemd's
// "reset") are refused. It returns an error wrapping ErrBadProperty and naming the property
// when NAME is unknown or not settable on a scope, or VALUE is not valid for it.
func ParseProperty(assignment string) (sdbus.Property, error) {
	name, value, ok := strings.Cut(assignment, "=")
	if !ok || name == "" {
		return sdbus.Property{}, fmt.Errorf("%w %q: not of the form NAME=VALUE", ErrBadProperty, assignment)
	}
	parse, ok := scopeProps()[name]
	if !ok {
		return sdbus.Property{}, fmt.Errorf("%w %s: %s", ErrBadProperty, name, unknownPropHint(name))
	}
	if value == "" {
		return sdbus.Property{}, fmt.Errorf("%w %s: empty value", ErrBadProperty, name)
	}
	p, err := parse(name, value)
	if err != nil {
		return sdbus.Property{}, fmt.Errorf("%w %s: %w", ErrBadProperty, name, err)
	}
	return p, nil
}

// ParseProperties parses each assignment with ParseProperty, in order, and returns the first
// error. Later assignments of the same setting win, as with systemd-run (StartScope passes
// them in this order).
func ParseProperties(assignments []string) ([]sdbus.Property, error) {
	props := make([]sdbus.Property, 0, len(assignments))
	for _, a := range assignments {
		p, err := ParseProperty(a)
		if err != nil {
			return nil, err
		}
		props = append(props, p)
	}
	return props, nil
}

// unknownPropHint explains why name is refused, suggesting the right spelling if only the
// case differs.
func unknownPropHint(name string) string {
	for known := range scopeProps() {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf("unknown property (did you mean %s?)", known)
		}
	}
	switch name {
	case "Slice":
		return "a scope's slice is chosen apart from its properties, not with Slice="
	case "MemoryLimit", "CPUShares", "StartupCPUShares", "BlockIOWeight", "StartupBlockIOWeight",
		"BlockIODeviceWeight", "BlockIOReadBandwidth", "BlockIOWriteBandwidth", "BlockIOAccounting":
		return "deprecated cgroup-v1 setting, not supported (use its cgroup-v2 successor)"
	}
	return "not a property of scope units (see systemd.scope(5), systemd.resource-control(5), systemd.kill(5))"
}

func prop(name string, v any) sdbus.Property {
	return sdbus.Property{Name: name, Value: dbus.MakeVariant(v)}
}

func boolProp(dbusName string) propParser {
	return func(_, v string) (sdbus.Property, error) {
		b, err := parseBool(v)
		return prop(dbusName, b), err
	}
}

func enumProp(dbusName string, values ...string) propParser {
	return func(_, v string) (sdbus.Property, error) {
		if !slices.Contains(values, v) {
			return sdbus.Property{}, fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
		}
		return prop(dbusName, v), nil
	}
}

func signalProp(dbusName string) propParser {
	return func(_, v string) (sdbus.Property, error) {
		sig, err := parseSignal(v)
		return prop(dbusName, sig), err
	}
}

// timespanProp parses a time span into microseconds under dbusName ("...USec"). A zero span
// is refused unless allowZero (a zero stop timeout or runtime would act at once).
func timespanProp(dbusName string, allowZero bool) propParser {
	return func(_, v string) (sdbus.Property, error) {
		usec, err := parseTimespan(v)
		if err == nil && usec == 0 && !allowZero {
			err = fmt.Errorf("must be above zero (use infinity for no limit)")
		}
		return prop(dbusName, usec), err
	}
}

// Weights of CPUWeight= and friends (CGROUP_WEIGHT_MIN..MAX).
const (
	weightMin = 1
	weightMax = 10000
)

func parseWeight(v string) (uint64, error) {
	w, err := sumComponents(v, map[string]uint64{"": 1}, "weight")
	if err != nil || w < weightMin || w > weightMax || strings.Contains(v, ".") {
		return 0, fmt.Errorf("%q is not a weight from %d to %d", v, weightMin, weightMax)
	}
	return w, nil
}

func weightProp(dbusName string) propParser {
	return func(_, v string) (sdbus.Property, error) {
		w, err := parseWeight(v)
		return prop(dbusName, w), err
	}
}

// cpuQuotaProp: CPUQuota=N% is CPUQuotaPerSecUSec, N% of one CPU second per second; above
// 100% for several CPUs.
func cpuQuotaProp(_, v string) (sdbus.Property, error) {
	p, ok, err := parsePermyriad(v, true)
	switch {
	case err != nil:
		return sdbus.Property{}, err
	case !ok:
		return sdbus.Property{}, fmt.Errorf("%q is not a percentage such as 50%% or 200%%", v)
	case p == 0:
		return sdbus.Property{}, fmt.Errorf("CPU quota %q is too small", v)
	}
	return prop("CPUQuotaPerSecUSec", p*1e6/10000), nil
}

// memoryProp parses a memory limit: bytes (base 1024), "infinity", or a percentage of
// physical memory, sent as <dbusName>Scale for systemd to resolve. Zero is refused unless
// allowZero (MemoryMax=0 would leave the command no memory at all).
func memoryProp(dbusName string, allowZero bool) propParser {
	return func(_, v string) (sdbus.Property, error) {
		if v == "infinity" {
			return prop(dbusName, uint64(infinity)), nil
		}
		if p, ok, err := parsePermyriad(v, false); ok || err != nil {
			return prop(dbusName+"Scale", scaleFromPermyriad(p)), err
		}
		n, err := parseSize(v, 1024)
		if err == nil && n == 0 && !allowZero {
			err = fmt.Errorf("must be above zero (use infinity for no limit)")
		}
		return prop(dbusName, n), err
	}
}

// tasksMaxProp: a count above zero, "infinity", or a percentage of the system's limit.
func tasksMaxProp(_, v string) (sdbus.Property, error) {
	if v == "infinity" {
		return prop("TasksMax", uint64(infinity)), nil
	}
	if p, ok, err := parsePermyriad(v, false); ok || err != nil {
		return prop("TasksMaxScale", scaleFromPermyriad(p)), err
	}
	n, err := sumComponents(v, map[string]uint64{"": 1}, "task count")
	if err != nil || n == 0 || strings.Contains(v, ".") {
		return sdbus.Property{}, fmt.Errorf("%q is not a task count above zero, a percentage or infinity", v)
	}
	return prop("TasksMax", n), nil
}

// oomLimitProp: ManagedOOMMemoryPressureLimit=N%, sent as a fraction of 2^32-1.
func oomLimitProp(_, v string) (sdbus.Property, error) {
	p, ok, err := parsePermyriad(v, false)
	if err == nil && !ok {
		err = fmt.Errorf("%q is not a percentage", v)
	}
	return prop("ManagedOOMMemoryPressureLimit", scaleFromPermyriad(p)), err
}

func cpuSetProp(dbusName string) propParser {
	return func(_, v string) (sdbus.Property, error) {
		mask, err := parseCPUSet(v)
		return prop(dbusName, mask), err
	}
}

// deviceValue is one (device path, value) pair: D-Bus signature (st).
type deviceValue struct {
	Path  string
	Value uint64
}

// parseRate parses an I/O limit: bytes or operations per second (base 1000), or infinity.
func parseRate(v string) (uint64, error) {
	if v == "infinity" {
		return infinity, nil
	}
	return parseSize(v, 1000)
}

// deviceProp parses "PATH VALUE" into a one-element a(st) under dbusName.
func deviceProp(dbusName string, parse func(string) (uint64, error)) propParser {
	return func(_, v string) (sdbus.Property, error) {
		path, val, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.HasPrefix(path, "/") {
			return sdbus.Property{}, fmt.Errorf("%q is not of the form /dev/PATH VALUE", v)
		}
		n, err := parse(strings.TrimSpace(val))
		return prop(dbusName, []deviceValue{{path, n}}), err
	}
}

// deviceAccess is one DeviceAllow= entry: D-Bus signature (ss).
type deviceAccess struct {
	Path   string
	Access string
}

// deviceAllowProp parses "PATH [rwm]" into a one-element a(ss).
func deviceAllowProp(_, v string) (sdbus.Property, error) {
	path, access, _ := strings.Cut(strings.TrimSpace(v), " ")
	access = strings.TrimSpace(access)
	if strings.Trim(access, "rwm") != "" {
		return sdbus.Property{}, fmt.Errorf("access %q is not made of r, w and m", access)
	}
	if !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "char-") && !strings.HasPrefix(path, "block-") {
		return sdbus.Property{}, fmt.Errorf("%q is neither a device path nor char-/block- followed by a class", path)
	}
	return prop("DeviceAllow", []deviceAccess{{path, access}}), nil
}

// delegateControllers are the controllers Delegate= may name.
var delegateControllers = []string{"cpu", "cpuacct", "cpuset", "io", "blkio", "memory", "devices", "pids"}

// delegateProp: a boolean (Delegate) or a list of controllers (DelegateControllers).
func delegateProp(_, v string) (sdbus.Property, error) {
	if b, err := parseBool(v); err == nil {
		return prop("Delegate", b), nil
	}
	list := strings.Fields(v)
	for _, c := range list {
		if !slices.Contains(delegateControllers, c) {
			return sdbus.Property{}, fmt.Errorf("%q is neither a boolean nor a cgroup controller (%s)", c, strings.Join(delegateControllers, ", "))
		}
	}
	return prop("DelegateControllers", list), nil
}

// RuntimeMaxProperty returns the scope property RuntimeMaxSec=d (D-Bus RuntimeMaxUSec, in
// whole microseconds) for a limit d > 0; the caller leaves it out for no limit.
func RuntimeMaxProperty(d time.Duration) sdbus.Property {
	return prop("RuntimeMaxUSec", uint64(d.Microseconds()))
}
