package sema

import "testing"

func TestFenceDelay(t *testing.T) { // D7
	const s = 1e9
	if d := fenceDelay(10*s, 6*s); d != 4*s {
		t.Errorf("ttl 10s, margin 6s: fence after %v, want 4s", d)
	}
	// margin too large: fence at the first failed keep-alive (2 intervals)
	if d := fenceDelay(5*s, 6*s); d != 2*keepAliveInterval(5*s, true) {
		t.Errorf("ttl 5s, margin 6s: fence after %v", d)
	}
	if !FenceTooLate(5*s, 5*s) || FenceTooLate(10*s, 5*s) {
		t.Error("FenceTooLate wrong for the defaults")
	}
	if iv := keepAliveInterval(10*s, true); iv != s {
		t.Errorf("hold cadence for 10s = %v, want 1s (at least once a second)", iv)
	}
	if iv := keepAliveInterval(3*s, true); iv != s/2 {
		t.Errorf("hold cadence for 3s = %v, want TTL/6", iv)
	}
}
