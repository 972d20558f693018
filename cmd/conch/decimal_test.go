package main

import "testing"

// -E takes what flock's -E takes: plain decimal, never another base (hostile test).
func TestDecimalFlag(t *testing.T) {
	for in, want := range map[string]int{"75": 75, "070": 70, "08": 8, "0": 0, "255": 255} {
		var d decimal
		if err := d.UnmarshalFlag(in); err != nil || int(d) != want {
			t.Errorf("%q: %d, %v; want %d", in, d, err, want)
		}
	}
	for _, in := range []string{"", "0x10", "0o17", "0b11", "1_0", "-1", "+1", "1e2", " 7", "9999999999"} {
		var d decimal
		if err := d.UnmarshalFlag(in); err == nil {
			t.Errorf("%q: accepted as %d", in, d)
		}
	}
}
