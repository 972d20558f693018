package sema

import (
	"context"
	"fmt"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitError is Acquire's verdict when it gives up without a slot: every slot was taken with
// Options.Nonblock, or the context passed to Acquire ended first. Unreachable says which
// of two ends it is (D3 gives each its own status): false, etcd answered and none of our
// keys is left; true, etcd did not answer when the wait ended, so our keys may linger until
// lease expiry. errors.Is matches ErrNoSlot (Nonblock) or ErrTimeout when etcd answered, and
// ErrUnavailable when it did not.
type WaitError struct {
	Name        string
	Max         int
	Nonblock    bool          // Options.Nonblock found no free slot (else the wait ended)
	NodeBusy    bool          // with Nonblock and Spread: this node already had a key (D11)
	Unreachable bool          // etcd did not answer when the wait ended: our keys may linger
	Err         error         // with Unreachable: the request that got no answer
	Paused      *schema.Pause // with Nonblock: the semaphore is paused, by this pause (D16)
	// HeldAfter are the slots among the first Max keys that were kept after a run (D13),
	// read once when etcd answered and no pause or node key explains the refusal; nil when
	// there were none or the read failed. Node and Until come from etcd: hostile input.
	HeldAfter []HeldAfter
}

func (e *WaitError) Error() string {
	switch {
	case e.Unreachable:
		return fmt.Sprintf("%v: %s: %v", ErrUnavailable, e.Name, e.Err)
	case e.Nonblock && e.NodeBusy:
		return fmt.Sprintf("%v in %s[max=%d]: %v", ErrNoSlot, e.Name, e.Max, errNodeHasKey)
	case e.Nonblock:
		return fmt.Sprintf("%v in %s[max=%d]", ErrNoSlot, e.Name, e.Max)
	}
	return fmt.Sprintf("%v %s[max=%d]", ErrTimeout, e.Name, e.Max)
}

// Is matches the sentinel the verdict stands for (see WaitError).
func (e *WaitError) Is(target error) bool {
	switch {
	case e.Unreachable:
		return target == ErrUnavailable
	case e.Nonblock:
		return target == ErrNoSlot || e.NodeBusy && target == errNodeHasKey
	}
	return target == ErrTimeout
}

// Unwrap returns the request's error of an Unreachable verdict.
func (e *WaitError) Unwrap() error { return e.Err }

// waitEnd is what Acquire knows when it gives up without a slot.
type waitEnd struct {
	stale    []clientv3.LeaseID // leases of this and earlier lives whose revoke failed
	nonblock bool               // Nonblock found no free slot (else ctx ended)
	nodeBusy bool               // with nonblock: because this node had a key (Spread, D11)
	// unanswered is the last request's error when it got no answer and no key of ours is
	// known to be gone since (a grant that failed); nil when etcd answered last
	unanswered error
	atStart    bool          // unanswered is the first grant's, which had ConnectTimeout: no probe
	paused     *schema.Pause // with nonblock: the pause that kept a free slot from us (D16)
}

// verdict is the one place that decides whether a wait that ended without a slot is "no slot
// while etcd answered" or "etcd unreachable" (D3); it returns a *WaitError. The
// stale leases are revoked once more, each within probeTimeout: one that etcd still cannot
// take back makes it Unreachable, since "no slot" promises that none of our keys is left (a
// restarted etcd even revives such leases). With no stale lease and an unanswered request,
// etcd is probed once (a count of the prefix, within probeTimeout), except at start, where
// the grant already had ConnectTimeout.
func (s *Semaphore) verdict(ctx context.Context, e waitEnd) error {
	v := &WaitError{Name: s.name, Max: s.max, Nonblock: e.nonblock, NodeBusy: e.nodeBusy, Paused: e.paused}
	ctx = markGiveUp(ctx) // one give-up budget for every step below (giveup.go)
	if left := s.revokeIDs(ctx, e.stale, giveUpWithin(ctx, s.probeTimeout())); len(left) > 0 {
		v.Unreachable, v.Err = true, fmt.Errorf("cannot revoke lease %s", schema.FormatLeaseID(int64(left[0])))
		return v
	}
	if e.unanswered == nil || len(e.stale) > 0 { // etcd answered our last request
		v.HeldAfter = s.heldAfterHolders(ctx, v)
		return v
	}
	if !e.atStart {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveUpWithin(ctx, s.probeTimeout()))
		defer cancel()
		_, err := s.c.Get(pctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil {
			v.HeldAfter = s.heldAfterHolders(ctx, v)
			return v
		}
	}
	v.Unreachable, v.Err = true, e.unanswered
	return v
}

// heldAfterHolders reads the first Max keys of the semaphore by create revision, in one
// request within the give-up budget (at most probeTimeout), and returns those kept after a
// run (D13e): the holders no process will release before their hold ends or a release frees
// them, which the refusal names. It returns nil when v is explained otherwise (a pause,
// Spread's node key), the caller words no refusal (Options.Terse) or the read fails: the
// note is extra, never a verdict.
func (s *Semaphore) heldAfterHolders(ctx context.Context, v *WaitError) []HeldAfter {
	if v.Paused != nil || v.NodeBusy || s.opts.Terse {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveUpWithin(ctx, s.probeTimeout()))
	defer cancel()
	resp, err := s.c.Get(rctx, s.prefix, clientv3.WithPrefix(), byCreateAsc, clientv3.WithLimit(int64(s.max)))
	if err != nil {
		return nil
	}
	var held []HeldAfter
	for _, kv := range resp.Kvs {
		if r := schema.DecodeRecord(kv.Value); heldAfterRecord(r) {
			held = append(held, HeldAfterOf(kv, r))
		}
	}
	return held
}
