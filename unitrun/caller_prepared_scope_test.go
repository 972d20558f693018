package unitrun

import (
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/conch-project/conch/internal/systemd"
)

// D8b: which specs get a scope before the slot, and when a prepared scope is the one Run asks
// for.
func TestPrepareAhead(t *testing.T) {
	scope := &scopeSpec{Name: "conch-sema-a-1.scope"}
	for _, tc := range []struct {
		spec Spec
		want bool
	}{
		{Spec{}, false},            // direct mode
		{Spec{scope: scope}, true}, // scope mode
		{Spec{scope: scope, stop: StopTiming{RuntimeMax: time.Second}}, false}, // RuntimeMaxSec counts from the scope's start
	} {
		if got := prepareAhead(tc.spec); got != tc.want {
			t.Errorf("prepareAhead(%+v) = %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestSameScope(t *testing.T) {
	base := scopeSpec{Name: "conch-sema-a-1.scope", Description: "d", Slice: "s.slice",
		Properties: []sdbus.Property{memoryMax(1 << 20)},
		Service:    systemd.CallerService{Unit: "a.service", Slice: "s.slice"}}
	with := func(mod func(*scopeSpec)) scopeSpec {
		s := base
		s.Properties = append([]sdbus.Property(nil), base.Properties...)
		mod(&s)
		return s
	}
	for _, tc := range []struct {
		what string
		b    scopeSpec
		want bool
	}{
		{"same", with(func(*scopeSpec) {}), true},
		{"other connection", with(func(s *scopeSpec) { s.Conn = &sdbus.Conn{} }), true},
		{"default timeout spelled out", with(func(s *scopeSpec) { s.Timeout = defaultScopeTimeout }), true},
		{"other timeout", with(func(s *scopeSpec) { s.Timeout = time.Second }), false},
		{"other name", with(func(s *scopeSpec) { s.Name = "conch-sema-a-2.scope" }), false},
		{"other property value", with(func(s *scopeSpec) { s.Properties[0] = memoryMax(2 << 20) }), false},
		{"other service", with(func(s *scopeSpec) { s.Service.Unit = "b.service" }), false},
	} {
		if got := sameScope(base, tc.b); got != tc.want {
			t.Errorf("%s: sameScope = %v, want %v", tc.what, got, tc.want)
		}
	}
}

// memoryMax is the scope property MemoryMax=n bytes.
func memoryMax(n uint64) sdbus.Property {
	return sdbus.Property{Name: "MemoryMax", Value: dbus.MakeVariant(n)}
}
