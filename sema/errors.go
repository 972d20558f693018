package sema

import (
	"errors"
	"fmt"

	"github.com/conch-project/conch/internal/etcderr"
)

// Errors returned by this package, wrapped with the semaphore or key they
// concern. Test them with errors.Is.
var (
	// errNodeHasKey: with Spread, this node already has a key under the
	// semaphore (held or waiting); returned wrapped together with ErrNoSlot
	// when Nonblock finds it so (D11: "no slot free" for this process).
	errNodeHasKey = errors.New("this node already has a key (one slot per node)")
	// ErrNoSlot: Acquire with Nonblock found every slot taken while etcd
	// answered; our key is gone again.
	ErrNoSlot = errors.New("no free slot")
	// ErrTimeout: the wait ended (the context passed to Acquire expired)
	// while etcd answered; our key is gone.
	ErrTimeout = errors.New("timed out waiting for a slot")
	// ErrUnavailable: etcd did not answer: at start within the connect
	// timeout, or when the wait ended during an outage; keys of ours may
	// remain until their lease expires.
	ErrUnavailable = errors.New("etcd unavailable")
	// ErrRefused: etcd rejected a request for good (permission denied,
	// authentication, an argument it refuses): retrying cannot help, and
	// nothing of ours was left in etcd.
	ErrRefused = errors.New("etcd refused the request")
	// ErrLeaseLost: the server reports our lease expired or revoked (D7).
	ErrLeaseLost = errors.New("lease lost")
	// ErrFenced: no keep-alive was confirmed in time, so the lease cannot be
	// proven alive past the fencing point (D7 self-fencing).
	ErrFenced = errors.New("lease not confirmable before its deadline")
	// ErrDeadlinePassed comes wrapped together with ErrFenced or ErrLeaseLost when a held
	// lease was found lost only after its deadline had passed (the last confirmed
	// keep-alive's send time plus the TTL, on our own clock): the process was stopped,
	// frozen or starved meanwhile, and the server may have handed the slot on already, so
	// the work under the slot must end at once, with no grace (D7b).
	ErrDeadlinePassed = errors.New("its deadline had passed when conch noticed")
	// ErrStateLost comes wrapped together with ErrLeaseLost when etcd lost or rewound its
	// state while the lease was held (D18): the server no longer knew the lease before its
	// deadline on our own clock, its cluster ID changed, or its revision went back. The
	// server may have handed the slot on already (an etcd restarted empty, a restore from an
	// older snapshot), so the work under the slot must end at once, with no grace, and its
	// fencing token (the create revision) may be handed out again by the new store.
	ErrStateLost = errors.New("etcd lost or rewound its state")
	// ErrKeyDeleted: our key was deleted by someone else, e.g. an operator (D7).
	ErrKeyDeleted = errors.New("key deleted")
	// ErrReleased: the holder was released by its owner.
	ErrReleased = errors.New("released")
)

// EtcdFailure wraps err, a failed request doing what ("cannot list the names in use"), as
// ErrRefused when etcd rejected it for good (etcderr.Refused: permissions, credentials, an
// invalid argument), else as ErrUnavailable; the layers over the recipe classify their own
// requests' failures with it, so every caller maps them to the same exits.
func EtcdFailure(what string, err error) error {
	if etcderr.Refused(err) {
		return fmt.Errorf("%w: %s: %w", ErrRefused, what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}
