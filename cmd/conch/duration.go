package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// duration is a flag value in Go syntax (500ms, 1m30s) or a bare integer of
// seconds; negative values are refused (D4).
type duration struct {
	d   time.Duration
	set bool
}

// UnmarshalFlag implements flags.Unmarshaler.
func (d *duration) UnmarshalFlag(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	d.d, d.set = v, true
	return nil
}

// MarshalFlag implements flags.Marshaler (defaults in --help).
func (d duration) MarshalFlag() (string, error) { return d.d.String(), nil }

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use Go syntax (500ms, 1m30s) or whole seconds", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return v, nil
}
