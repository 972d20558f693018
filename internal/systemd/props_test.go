package systemd

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

func TestParseProperty(t *testing.T) {
	const GiB = 1 << 30
	for _, tc := range []struct {
		in       string
		dbusName string
		want     any
	}{
		{"MemoryMax=300M", "MemoryMax", uint64(300 << 20)},
		{"MemoryMax=1.5G", "MemoryMax", uint64(GiB * 3 / 2)},
		{"MemoryMax=1G 512M", "MemoryMax", uint64(GiB + 512<<20)},
		{"MemoryMax=4096", "MemoryMax", uint64(4096)},
		{"MemoryMax=4096B", "MemoryMax", uint64(4096)},
		{"MemoryMax=infinity", "MemoryMax", uint64(math.MaxUint64)},
		{"MemoryMax=50%", "MemoryMaxScale", uint32(2147483648)},
		{"MemoryMax=100%", "MemoryMaxScale", uint32(math.MaxUint32)},
		{"MemoryHigh=12.5%", "MemoryHighScale", uint32(536870912)},
		{"MemoryLow=0", "MemoryLow", uint64(0)},
		{"MemoryMin=64K", "MemoryMin", uint64(64 << 10)},
		{"MemorySwapMax=0", "MemorySwapMax", uint64(0)},
		{"CPUQuota=50%", "CPUQuotaPerSecUSec", uint64(500000)},
		{"CPUQuota=200%", "CPUQuotaPerSecUSec", uint64(2000000)},
		{"CPUQuota=0.5%", "CPUQuotaPerSecUSec", uint64(5000)},
		{"CPUQuotaPeriodSec=10ms", "CPUQuotaPeriodUSec", uint64(10000)},
		{"CPUWeight=100", "CPUWeight", uint64(100)},
		{"StartupCPUWeight=10000", "StartupCPUWeight", uint64(10000)},
		{"IOWeight=1", "IOWeight", uint64(1)},
		{"TasksMax=64", "TasksMax", uint64(64)},
		{"TasksMax=infinity", "TasksMax", uint64(math.MaxUint64)},
		{"TasksMax=10%", "TasksMaxScale", uint32(429496730)},
		{"RuntimeMaxSec=2", "RuntimeMaxUSec", uint64(2e6)},
		{"RuntimeMaxSec=2s", "RuntimeMaxUSec", uint64(2e6)},
		{"RuntimeMaxSec=1min", "RuntimeMaxUSec", uint64(60e6)},
		{"RuntimeMaxSec=1min 30s", "RuntimeMaxUSec", uint64(90e6)},
		{"RuntimeMaxSec=1h30m", "RuntimeMaxUSec", uint64(5400e6)},
		{"RuntimeMaxSec=1.5s", "RuntimeMaxUSec", uint64(1.5e6)},
		{"RuntimeMaxSec=infinity", "RuntimeMaxUSec", uint64(math.MaxUint64)},
		{"RuntimeRandomizedExtraSec=0", "RuntimeRandomizedExtraUSec", uint64(0)},
		{"TimeoutStopSec=500ms", "TimeoutStopUSec", uint64(500000)},
		{"TimeoutStopSec=2d", "TimeoutStopUSec", uint64(2 * 86400e6)},
		{"KillSignal=SIGINT", "KillSignal", int32(2)},
		{"KillSignal=INT", "KillSignal", int32(2)},
		{"KillSignal=2", "KillSignal", int32(2)},
		{"KillSignal=SIGRTMIN+3", "KillSignal", int32(37)},
		{"FinalKillSignal=SIGKILL", "FinalKillSignal", int32(9)},
		{"WatchdogSignal=RTMAX", "WatchdogSignal", int32(64)},
		{"KillMode=control-group", "KillMode", "control-group"},
		{"KillMode=mixed", "KillMode", "mixed"},
		{"SendSIGKILL=yes", "SendSIGKILL", true},
		{"SendSIGKILL=0", "SendSIGKILL", false},
		{"SendSIGHUP=on", "SendSIGHUP", true},
		{"MemoryAccounting=true", "MemoryAccounting", true},
		{"Delegate=yes", "Delegate", true},
		{"Delegate=cpu memory", "DelegateControllers", []string{"cpu", "memory"}},
		{"DevicePolicy=closed", "DevicePolicy", "closed"},
		{"DeviceAllow=/dev/null rw", "DeviceAllow", []deviceAccess{{"/dev/null", "rw"}}},
		{"DeviceAllow=char-pts", "DeviceAllow", []deviceAccess{{"char-pts", ""}}},
		{"IOReadBandwidthMax=/dev/sda 1M", "IOReadBandwidthMax", []deviceValue{{"/dev/sda", 1e6}}},
		{"IOWriteIOPSMax=/dev/vda 1K", "IOWriteIOPSMax", []deviceValue{{"/dev/vda", 1000}}},
		{"IODeviceWeight=/dev/sda 200", "IODeviceWeight", []deviceValue{{"/dev/sda", 200}}},
		{"IODeviceLatencyTargetSec=/dev/sda 25ms", "IODeviceLatencyTargetUSec", []deviceValue{{"/dev/sda", 25000}}},
		{"AllowedCPUs=0-2,5", "AllowedCPUs", []byte{0x27}},
		{"AllowedMemoryNodes=0 9", "AllowedMemoryNodes", []byte{0x01, 0x02}},
		{"ManagedOOMSwap=kill", "ManagedOOMSwap", "kill"},
		{"ManagedOOMMemoryPressureLimit=50%", "ManagedOOMMemoryPressureLimit", uint32(2147483648)},
		{"ManagedOOMPreference=avoid", "ManagedOOMPreference", "avoid"},
	} {
		got, err := ParseProperty(tc.in)
		if err != nil {
			t.Errorf("ParseProperty(%q): %v", tc.in, err)
			continue
		}
		want := sdbus.Property{Name: tc.dbusName, Value: dbus.MakeVariant(tc.want)}
		if got.Name != want.Name || !reflect.DeepEqual(got.Value.Value(), want.Value.Value()) ||
			got.Value.Signature() != want.Value.Signature() {
			t.Errorf("ParseProperty(%q) = %s %s %v, want %s %s %v", tc.in,
				got.Name, got.Value.Signature(), got.Value.Value(), want.Name, want.Value.Signature(), want.Value.Value())
		}
	}
}

func TestParsePropertySignatures(t *testing.T) {
	// The D-Bus types systemd 252 expects (src/core/dbus-cgroup.c, dbus-kill.c, dbus-scope.c).
	for in, sig := range map[string]string{
		"MemoryMax=1G":                     "t",
		"MemoryMax=10%":                    "u",
		"CPUQuota=50%":                     "t",
		"KillSignal=SIGINT":                "i",
		"SendSIGKILL=yes":                  "b",
		"KillMode=mixed":                   "s",
		"AllowedCPUs=1":                    "ay",
		"IOReadBandwidthMax=/dev/sda 1M":   "a(st)",
		"DeviceAllow=/dev/null r":          "a(ss)",
		"Delegate=pids":                    "as",
		"ManagedOOMMemoryPressureLimit=1%": "u",
	} {
		p, err := ParseProperty(in)
		if err != nil {
			t.Errorf("ParseProperty(%q): %v", in, err)
			continue
		}
		if got := p.Value.Signature().String(); got != sig {
			t.Errorf("ParseProperty(%q) has D-Bus type %s, want %s", in, got, sig)
		}
	}
}

func TestParsePropertyRefuses(t *testing.T) {
	for _, tc := range []struct{ in, mention string }{
		{"MemoryMax", "NAME=VALUE"},
		{"=1G", "NAME=VALUE"},
		{"Foo=1", "Foo"},
		{"ExecStart=/bin/true", "not a property of scope units"},
		{"Restart=always", "Restart"},
		{"Description=x", "Description"},
		{"Slice=foo.slice", "chosen apart"},
		{"MemoryLimit=1G", "deprecated"},
		{"CPUShares=100", "deprecated"},
		{"memorymax=1G", "did you mean MemoryMax"},
		{"MemoryMax=", "empty value"},
		{"MemoryMax=0", "above zero"},
		{"MemoryMax=-1", "MemoryMax"},
		{"MemoryMax=1Q", "unknown unit"},
		{"MemoryMax=1k", "unknown unit"},
		{"MemoryMax=101%", "above 100%"},
		{"MemoryMax=abc", "MemoryMax"},
		{"MemoryMax=99999999E", "too large"},
		{"MemoryHigh=0", "above zero"},
		{"CPUQuota=50", "percentage"},
		{"CPUQuota=0%", "too small"},
		{"CPUQuota=1.234%", "percentage"},
		{"CPUWeight=0", "weight"},
		{"CPUWeight=10001", "weight"},
		{"CPUWeight=idle", "weight"},
		{"IOWeight=1.5", "weight"},
		{"TasksMax=0", "above zero"},
		{"TasksMax=-5", "TasksMax"},
		{"RuntimeMaxSec=0", "above zero"},
		{"RuntimeMaxSec=5 parsecs", "unknown unit"},
		{"RuntimeMaxSec=-1", "RuntimeMaxSec"},
		{"TimeoutStopSec=0s", "above zero"},
		{"KillSignal=SIGFOO", "not a signal"},
		{"KillSignal=0", "out of range"},
		{"KillSignal=65", "out of range"},
		{"KillSignal=sigint", "not a signal"},
		{"KillSignal=RTMIN+31", "real-time"},
		{"KillMode=process", "control-group, mixed"},
		{"KillMode=none", "control-group, mixed"},
		{"SendSIGKILL=maybe", "boolean"},
		{"DevicePolicy=open", "auto, closed, strict"},
		{"DeviceAllow=/dev/null rwx", "r, w and m"},
		{"DeviceAllow=null rw", "device path"},
		{"IOReadBandwidthMax=1M", "/dev/PATH VALUE"},
		{"IOReadBandwidthMax=sda 1M", "/dev/PATH VALUE"},
		{"IODeviceWeight=/dev/sda 0", "weight"},
		{"AllowedCPUs=3-1", "CPU"},
		{"AllowedCPUs=99999", "CPU"},
		{"Delegate=cpu gpu", "controller"},
		{"ManagedOOMMemoryPressureLimit=50", "percentage"},
	} {
		_, err := ParseProperty(tc.in)
		if !errors.Is(err, ErrBadProperty) {
			t.Errorf("ParseProperty(%q) = %v, want ErrBadProperty", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseProperty(%q) = %q, want it to mention %q", tc.in, err, tc.mention)
		}
	}
}

func TestParseProperties(t *testing.T) {
	props, err := ParseProperties([]string{"MemoryMax=1G", "KillSignal=SIGINT", "MemoryMax=2G"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range props {
		names = append(names, p.Name)
	}
	if want := []string{"MemoryMax", "KillSignal", "MemoryMax"}; !reflect.DeepEqual(names, want) {
		t.Errorf("ParseProperties kept %v, want %v in order", names, want)
	}
	if _, err := ParseProperties([]string{"MemoryMax=1G", "Bogus=1"}); !errors.Is(err, ErrBadProperty) || !strings.Contains(err.Error(), "Bogus") {
		t.Errorf("ParseProperties with a bad one = %v, want ErrBadProperty naming Bogus", err)
	}
}

// Every entry of the table parses some value: no entry is dead.
func TestScopePropsTableComplete(t *testing.T) {
	samples := []string{"yes", "100", "1", "50%", "1s", "0-1", "/dev/sda 1", "/dev/null rw", "auto", "none", "control-group", "SIGTERM", "kill"}
	for name := range scopeProps() {
		ok := false
		for _, v := range samples {
			if _, err := ParseProperty(name + "=" + v); err == nil {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("no sample value parses for %s", name)
		}
	}
}
