package schema

import (
	"errors"
	"fmt"
)

// Errors of the validators (ValidateName, ParseMax, ValidateNode), wrapped
// with the value they refuse. Test them with errors.Is.
var (
	// ErrBadName: the name does not match [A-Za-z0-9][A-Za-z0-9._-]{0,127} (D4).
	ErrBadName = errors.New("invalid semaphore name")
	// ErrBadMax: the capacity is not an integer in 1..10000 (D4).
	ErrBadMax = errors.New("invalid capacity")
	// ErrBadNode: the node name of a Spread key is not valid (D11: D4's
	// name rule, and not 16 lower-case hex digits, which a lease key's
	// suffix is).
	ErrBadNode = errors.New("invalid node name")
)

// FormatClusterID spells a cluster ID as CONCH_CLUSTER_ID carries it: 16 lower-case hex
// digits, as etcdctl prints member and cluster IDs.
func FormatClusterID(id uint64) string { return fmt.Sprintf("%016x", id) }
