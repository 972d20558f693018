package sema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KeyRoot is the prefix under which every semaphore lives (04_sema.md).
const KeyRoot = "/conch/v1/sema/"

// MaxCapacity is the largest --max accepted (D4).
const MaxCapacity = 10000

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateName returns nil if name is a valid semaphore name, else an error
// wrapping ErrBadName (D4). It does no I/O.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}", ErrBadName, name)
	}
	return nil
}

// ParseMax parses a capacity: a plain decimal integer 1..MaxCapacity with no
// sign (D4). Errors wrap ErrBadMax.
func ParseMax(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w %q: must be a plain decimal integer 1..%d", ErrBadMax, s, MaxCapacity)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxCapacity {
		return 0, fmt.Errorf("%w %q: must be 1..%d", ErrBadMax, s, MaxCapacity)
	}
	return n, nil
}

// NamePrefix is the prefix of every key of the semaphore name, all capacities
// included; it ends with "/" so that "a" never matches "ab" (D4).
func NamePrefix(name string) string { return KeyRoot + name + "/" }

// Prefix is the prefix of the semaphore (name, max): capacity is part of its
// identity (04_sema.md, "--max is part of the name").
func Prefix(name string, max int) string {
	return NamePrefix(name) + strconv.Itoa(max) + "/"
}

// leaseKey is the key of the holder that owns lease id: the lease ID suffix
// makes it unique (04_sema.md, step 1).
func leaseKey(prefix string, id clientv3.LeaseID) string {
	return fmt.Sprintf("%s%016x", prefix, int64(id))
}

// parseKey splits a key under NamePrefix(name) into its capacity and lease
// ID. ok is false for keys that do not follow the schema.
func parseKey(name, key string) (max int, lease int64, ok bool) {
	rest, found := strings.CutPrefix(key, NamePrefix(name))
	if !found {
		return 0, 0, false
	}
	m, id, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	max, err := ParseMax(m)
	if err != nil {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(id, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return max, int64(v), true
}
