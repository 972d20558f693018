package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxDuration bounds every duration conch takes (100 years): far beyond any
// wait or lease, and small enough that no sum conch makes with one (a TTL
// rounded up, a deadline plus a grace) can overflow time.Duration into a
// short or negative value.
const maxDuration = 100 * 365 * 24 * time.Hour

// duration is a flag value in Go syntax (500ms, 1m30s) or a number of
// seconds, fractional as flock -w takes it (1.5); negative values and values
// above maxDuration are refused (D4).
type duration struct {
	d   time.Duration
	set bool
}

// UnmarshalFlag implements flags.Unmarshaler.
// A second occurrence on the command line is refused (once.go): go-flags applies a default
// only to a flag that was not given.
func (d *duration) UnmarshalFlag(s string) error {
	if d.set {
		return givenTwice(d.d.String(), s)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	d.d, d.set = v, true
	return nil
}

// MarshalFlag implements flags.Marshaler (defaults in --help).
func (d duration) MarshalFlag() (string, error) { return d.d.String(), nil }

// quoteShort quotes s for a message, at most ~64 bytes however long s is or
// however many bytes need escaping (a fuzzer's find: 35 bytes of invalid
// UTF-8 made a 201-byte message).
func quoteShort(s string) string {
	if q := strconv.QuoteToASCII(s); len(q) <= 64 {
		return q
	} else {
		return q[:60] + `..."`
	}
}

// parseDuration parses s (surrounding blanks ignored) as a Go duration or a
// number of seconds (strconv.ParseFloat's syntax: 10, 1.5, .5, 1e3). Errors:
// not a duration, negative, NaN or infinite, or more than maxDuration; the
// message quotes s (quoteShort) and says what is accepted.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	shown := quoteShort(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXnN") { // no hex, NaN, Inf
		switch {
		case f < 0 || math.Signbit(f):
			return 0, fmt.Errorf("invalid duration %s: must not be negative", shown)
		case f > maxDuration.Seconds():
			return 0, fmt.Errorf("invalid duration %s: more than the %v allowed", shown, maxDuration)
		}
		return time.Duration(math.Round(f * float64(time.Second))), nil
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("invalid duration %s: use Go syntax (500ms, 1m30s) or seconds (10, 1.5)", shown)
	case v < 0:
		return 0, fmt.Errorf("invalid duration %s: must not be negative", shown)
	case v > maxDuration:
		return 0, fmt.Errorf("invalid duration %s: more than the %v allowed", shown, maxDuration)
	}
	return v, nil
}
