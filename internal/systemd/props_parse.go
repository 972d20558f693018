package systemd

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Value parsers for scope properties, following the syntax systemd-run -p accepts (systemd
// 252: parse_boolean, parse_size, parse_sec, parse_permyriad, signal_from_string,
// parse_cpu_set). Each returns a plain error saying what is wrong; the caller wraps it with
// ErrBadProperty and the property's name.

// infinity is systemd's "no limit" for sizes, counts and times (CGROUP_LIMIT_MAX, USEC_INFINITY).
const infinity = math.MaxUint64

// parseBool parses a systemd boolean: 1/yes/y/true/t/on or 0/no/n/false/f/off, any case.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "yes", "y", "true", "t", "on":
		return true, nil
	case "0", "no", "n", "false", "f", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (yes or no)", s)
}

// component is one "<number>[<unit>]" of a size or a time span; systemd accepts several in a
// row ("1G 512M", "1min 30s") and adds them up. Compiled on first use, like percent: the
// guardian (D7a) never parses a property.
var component = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([^0-9\s.]*)`) })

// sumComponents parses s as one or more components whose unit factors says, and returns the
// sum rounded down. An empty unit uses factors[""] when present.
func sumComponents(s string, factors map[string]uint64, what string) (uint64, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("empty %s", what)
	}
	sum := new(big.Rat)
	for rest != "" {
		m := component().FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("%q is not a valid %s", s, what)
		}
		factor, ok := factors[m[2]]
		if !ok {
			return 0, fmt.Errorf("%q is not a valid %s: unknown unit %q", s, what, m[2])
		}
		num, _ := new(big.Rat).SetString(m[1])
		sum.Add(sum, num.Mul(num, new(big.Rat).SetUint64(factor)))
		rest = strings.TrimLeft(rest[len(m[0]):], " \t")
	}
	v := new(big.Int).Quo(sum.Num(), sum.Denom())
	if !v.IsUint64() || v.Uint64() == infinity {
		return 0, fmt.Errorf("%s %q is too large", what, s)
	}
	return v.Uint64(), nil
}

// sizeFactors returns the suffixes of parse_size for base 1024 (memory) or 1000 (I/O rates).
func sizeFactors(base uint64) map[string]uint64 {
	f := map[string]uint64{"": 1, "B": 1}
	p := uint64(1)
	for _, s := range []string{"K", "M", "G", "T", "P", "E"} {
		p *= base
		f[s] = p
	}
	return f
}

var (
	bytes1024 = sizeFactors(1024)
	bytes1000 = sizeFactors(1000)
)

// parseSize parses a byte count as parse_size does: "300M", "1.5G", "1G 512M", "4096"
// (suffixes K M G T P E are powers of base; B or none means bytes).
func parseSize(s string, base uint64) (uint64, error) {
	f := bytes1024
	if base == 1000 {
		f = bytes1000
	}
	return sumComponents(s, f, "size")
}

// usecFactors are parse_sec's time units in microseconds; a bare number means seconds.
var usecFactors = map[string]uint64{
	"": 1e6, "s": 1e6, "sec": 1e6, "second": 1e6, "seconds": 1e6,
	"us": 1, "usec": 1, "µs": 1, "μs": 1,
	"ms": 1e3, "msec": 1e3,
	"m": 60e6, "min": 60e6, "minute": 60e6, "minutes": 60e6,
	"h": 3600e6, "hr": 3600e6, "hour": 3600e6, "hours": 3600e6,
	"d": 86400e6, "day": 86400e6, "days": 86400e6,
	"w": 604800e6, "week": 604800e6, "weeks": 604800e6,
	"M": 2629800e6, "month": 2629800e6, "months": 2629800e6,
	"y": 31557600e6, "year": 31557600e6, "years": 31557600e6,
}

// parseTimespan parses a time span as parse_sec does ("2", "2s", "1min 30s", "500ms",
// "infinity") and returns microseconds (infinity for "infinity").
func parseTimespan(s string) (uint64, error) {
	if strings.TrimSpace(s) == "infinity" {
		return infinity, nil
	}
	return sumComponents(s, usecFactors, "time span")
}

// percent matches parse_permyriad's percentage form, with at most two decimals.
var percent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)(?:\.([0-9]{1,2}))?%$`) })

// parsePermyriad parses "N%", "N.N%" or "N.NN%" into ten-thousandths. ok is false when s is
// not written as a percentage at all; err is set when it is one but out of range (above 100%
// unless unbounded).
func parsePermyriad(s string, unbounded bool) (permyriad uint64, ok bool, err error) {
	m := percent().FindStringSubmatch(s)
	if m == nil {
		return 0, false, nil
	}
	whole, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil {
		return 0, true, fmt.Errorf("percentage %q is too large", s)
	}
	frac := m[2] + strings.Repeat("0", 2-len(m[2]))
	f, _ := strconv.ParseUint(frac, 10, 8)
	p := whole*100 + f
	if !unbounded && p > 10000 {
		return 0, true, fmt.Errorf("percentage %q is above 100%%", s)
	}
	return p, true, nil
}

// scaleFromPermyriad maps ten-thousandths to the range 0..2^32-1 as systemd's
// UINT32_SCALE_FROM_PERMYRIAD does (100% is 2^32-1, rounded to the closest).
func scaleFromPermyriad(p uint64) uint32 {
	p = min(p, 10000)
	return uint32((p*math.MaxUint32 + 5000) / 10000)
}

// Real-time signals as glibc numbers them (the kernel's 32 and 33 are taken by glibc).
const (
	sigRTMin = 34
	sigRTMax = 64
)

// parseSignal parses a signal as signal_from_string does: "SIGINT", "INT", "RTMIN+3",
// "SIGRTMAX-1" or a number from 1 to 64.
func parseSignal(s string) (int32, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > sigRTMax {
			return 0, fmt.Errorf("signal number %d is out of range 1..%d", n, sigRTMax)
		}
		return int32(n), nil
	}
	name := strings.TrimPrefix(s, "SIG")
	for _, rt := range []struct {
		prefix string
		base   int
		sign   int
	}{{"RTMIN+", sigRTMin, 1}, {"RTMAX-", sigRTMax, -1}} {
		if off, ok := strings.CutPrefix(name, rt.prefix); ok {
			n, err := strconv.Atoi(off)
			if sig := rt.base + rt.sign*n; err == nil && n >= 0 && sig >= sigRTMin && sig <= sigRTMax {
				return int32(sig), nil
			}
			return 0, fmt.Errorf("%q is not a real-time signal in range", s)
		}
	}
	switch name {
	case "RTMIN":
		return sigRTMin, nil
	case "RTMAX":
		return sigRTMax, nil
	}
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return int32(sig), nil
	}
	return 0, fmt.Errorf("%q is not a signal name or number", s)
}

// maxCPUSetBit bounds CPU and NUMA node numbers in AllowedCPUs= and friends.
const maxCPUSetBit = 8191

// parseCPUSet parses a CPU or NUMA node list as parse_cpu_set does ("0-3,5 7") and returns
// the bitmask systemd expects on D-Bus (bit i of byte i/8 for number i).
func parseCPUSet(s string) ([]byte, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty CPU list")
	}
	var mask []byte
	for _, word := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		lo, hi, isRange := strings.Cut(word, "-")
		a, errA := strconv.Atoi(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < a || b > maxCPUSetBit {
			return nil, fmt.Errorf("%q is not a valid CPU number or range (0..%d)", word, maxCPUSetBit)
		}
		for i := a; i <= b; i++ {
			if need := i/8 + 1; len(mask) < need {
				mask = append(mask, make([]byte, need-len(mask))...)
			}
			mask[i/8] |= 1 << (i % 8)
		}
	}
	return mask, nil
}
