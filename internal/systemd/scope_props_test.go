package systemd

import (
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// The grace period reaches systemd once: as KillAfter, or as the TimeoutStopSec among the
// properties, which then is the grace (unitrun's stop timing), never both.
func TestScopePropertiesGraceOnce(t *testing.T) {
	grace := func(props []sdbus.Property) (n int, usec uint64) {
		for _, p := range props {
			if p.Name == "TimeoutStopUSec" {
				n, usec = n+1, p.Value.Value().(uint64)
			}
		}
		return n, usec
	}
	if n, usec := grace(scopeProperties(ScopeRequest{Name: "x.scope", KillAfter: 3 * time.Second})); n != 1 || usec != 3e6 {
		t.Errorf("KillAfter 3s: %d TimeoutStopUSec, the last %d; want one, 3000000", n, usec)
	}
	if n, _ := grace(scopeProperties(ScopeRequest{Name: "x.scope"})); n != 0 {
		t.Errorf("no KillAfter: %d TimeoutStopUSec; want none, the manager's default", n)
	}
	p, err := ParseProperty("TimeoutStopSec=2s")
	if err != nil {
		t.Fatal(err)
	}
	req := ScopeRequest{Name: "x.scope", KillAfter: 2 * time.Second, Properties: []sdbus.Property{p}}
	if n, usec := grace(scopeProperties(req)); n != 1 || usec != 2e6 {
		t.Errorf("-p TimeoutStopSec=2s: %d TimeoutStopUSec, the last %d; want one, 2000000", n, usec)
	}
}
