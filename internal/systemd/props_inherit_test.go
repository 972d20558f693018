package systemd

import (
	"math"
	"testing"
)

func TestPickInherited(t *testing.T) {
	got := pickInherited(map[string]any{
		"MemoryMax":          uint64(300 << 20),
		"MemoryHigh":         uint64(math.MaxUint64), // not set
		"CPUQuotaPerSecUSec": uint64(500000),
		"CPUWeight":          uint64(math.MaxUint64), // not set
		"TasksMax":           uint64(4915),
		"IOWeight":           uint64(200),
		"MemoryLow":          uint64(1 << 20), // not inherited (D8 lists six settings)
		"Description":        "x",
	})
	want := map[string]uint64{"MemoryMax": 300 << 20, "CPUQuotaPerSecUSec": 500000, "TasksMax": 4915, "IOWeight": 200}
	if len(got) != len(want) {
		t.Fatalf("pickInherited = %v, want %v", got, want)
	}
	for _, p := range got {
		if v, ok := p.Value.Value().(uint64); !ok || want[p.Name] != v || p.Value.Signature().String() != "t" {
			t.Errorf("inherited %s = %v (%s), want uint64 %d", p.Name, p.Value.Value(), p.Value.Signature(), want[p.Name])
		}
	}
	if got := pickInherited(map[string]any{}); len(got) != 0 {
		t.Errorf("pickInherited of nothing = %v", got)
	}
}
