package fleet

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/conch-project/conch/sema/schema"
)

// The environment variables that carry a slot to the work its holder runs (D5): the
// semaphore's name and capacity, the lease the key is bound to (schema.FormatLeaseID's spelling)
// and the key's create revision in decimal, the fencing token.
const (
	EnvName  = "CONCH_SEMA"
	EnvMax   = "CONCH_MAX"
	EnvLease = "CONCH_LEASE"
	EnvRev   = "CONCH_REV"
	// EnvCluster is the ID of the etcd cluster that granted the slot (schema.FormatClusterID's
	// spelling): with EnvRev it names the fencing token's epoch (D18).
	EnvCluster = "CONCH_CLUSTER_ID"
)

// ErrNoSlotEnv is SlotFromEnv's error when none of EnvName, EnvLease and EnvRev is set: the
// process was not started by a holder.
var ErrNoSlotEnv = errors.New("no slot in the environment")

// SlotFromEnv reads the slot a holder handed to the process whose environment getenv reads
// (EnvName, EnvMax, EnvLease, EnvRev), for CheckHeld. Errors: ErrNoSlotEnv when none of
// EnvName, EnvLease and EnvRev is set (empty counts as unset); else one naming the first
// variable that cannot be read and what it must hold (schema.ErrBadName or schema.ErrBadMax wrapped for
// those two).
func SlotFromEnv(getenv func(string) string) (Slot, error) {
	if getenv(EnvName) == "" && getenv(EnvRev) == "" && getenv(EnvLease) == "" {
		return Slot{}, ErrNoSlotEnv
	}
	s := Slot{Name: getenv(EnvName)}
	var err error
	if err = schema.ValidateName(s.Name); err != nil {
		return s, fmt.Errorf("%s: %w", EnvName, err)
	}
	if s.Max, err = schema.ParseMax(getenv(EnvMax)); err != nil {
		return s, fmt.Errorf("%s: %w", EnvMax, err)
	}
	var ok bool
	if s.Lease, ok = schema.ParseLeaseID(getenv(EnvLease)); !ok {
		return s, fmt.Errorf("%s %q is not a lease ID (16 lower-case hex digits)", EnvLease, getenv(EnvLease))
	}
	if s.Rev, err = strconv.ParseInt(getenv(EnvRev), 10, 64); err != nil || s.Rev < 1 {
		return s, fmt.Errorf("%s %q is not a revision (a decimal integer above 0)", EnvRev, getenv(EnvRev))
	}
	return s, nil
}

// Of reports whether s is a slot of the semaphore named name with capacity max, where an
// empty name or a max of 0 matches any.
func (s Slot) Of(name string, max int) bool {
	return (name == "" || name == s.Name) && (max == 0 || max == s.Max)
}
