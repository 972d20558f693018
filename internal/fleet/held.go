package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reasons CheckHeld gives for a slot that is not held; each is wrapped
// together with ErrNotHeld.
var (
	// ErrNotHeld: the slot named is not held by its owner at the read.
	ErrNotHeld = errors.New("slot not held")
	// errHeldKeyGone: no key of the semaphore was created at the revision,
	// and none is bound to the lease: it was deleted (or never existed).
	errHeldKeyGone = errors.New("key deleted")
	// errHeldLeaseGone: etcd reports the lease expired or revoked.
	errHeldLeaseGone = errors.New("lease expired or revoked")
	// errHeldOtherRev: the lease's key has another create revision than
	// the one given, or the key created at that revision is bound to
	// another lease.
	errHeldOtherRev = errors.New("another revision")
	// errHeldNotWithin: the key exists, but max or more keys are ahead of
	// it: it waits, it does not hold.
	errHeldNotWithin = errors.New("not within the first max keys")
)

// Slot names a slot as the process that holds it knows it: its
// semaphore, capacity, the lease its key is bound to and the key's create
// revision (the fencing token, D5).
type Slot struct {
	Name  string
	Max   int
	Lease int64
	Rev   int64
}

// HeldSlot is what CheckHeld read about a held slot.
type HeldSlot struct {
	Key     string          // the key, as stored
	Rank    int             // 0-based rank by create revision, < Max
	TTL     schema.LeaseTTL // the lease's time to live after the read
	ReadRev int64           // the revision of the read
}

// CheckHeld reports whether s is held, from one linearizable read (a Txn:
// the key created at s.Rev under schema.Prefix(s.Name, s.Max), and the first
// s.Max keys by create revision) and the lease's time to live read after
// it. The slot is held when that key exists, is bound to s.Lease, is among
// the first s.Max keys (D6: HELD iff rank < max) and the lease is alive.
// It blocks until both requests answer or ctx ends. Errors: schema.ErrBadName or
// schema.ErrBadMax; ErrNotHeld wrapped with the reason, which the message says (the lease
// expired or was revoked, the key was deleted, another revision, not within the first max
// keys); sema.ErrRefused or
// sema.ErrUnavailable when etcd refuses or fails a request.
func CheckHeld(ctx context.Context, c *clientv3.Client, s Slot) (HeldSlot, error) {
	if err := schema.ValidateSemaphore(s.Name, s.Max); err != nil {
		return HeldSlot{}, err
	}
	prefix := schema.Prefix(s.Name, s.Max)
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithMinCreateRev(s.Rev), clientv3.WithMaxCreateRev(s.Rev)),
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), byCreateAsc, clientv3.WithLimit(int64(s.Max))),
	).Commit()
	if err != nil {
		return HeldSlot{}, sema.EtcdFailure("cannot read "+prefix, err)
	}
	h := HeldSlot{Rank: -1, ReadRev: resp.Header.Revision}
	ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(s.Lease), clientv3.WithAttachedKeys())
	if err != nil {
		return h, sema.EtcdFailure("cannot read lease "+schema.FormatLeaseID(s.Lease), err)
	}
	h.TTL = schema.LeaseTTL{Known: true, Left: ttl.TTL, Granted: ttl.GrantedTTL}
	at := resp.Responses[0].GetResponseRange().Kvs
	if len(at) > 0 {
		h.Key = string(at[0].Key)
	}
	for i, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if string(kv.Key) == h.Key {
			h.Rank = i
		}
	}
	what := fmt.Sprintf("%s[max=%d] rev %d lease %s", s.Name, s.Max, s.Rev, schema.FormatLeaseID(s.Lease))
	switch {
	case ttl.TTL < 0:
		return h, fmt.Errorf("%[2]s: %[1]w: %[3]w", ErrNotHeld, what, errHeldLeaseGone)
	case len(at) == 0 && attachedUnder(ttl.Keys, prefix) != "":
		return h, fmt.Errorf("%[2]s: %[1]w: %[3]w: the lease's key %[4]s was created at another", ErrNotHeld, what, errHeldOtherRev, attachedUnder(ttl.Keys, prefix))
	case len(at) == 0:
		return h, fmt.Errorf("%[2]s: %[1]w: %[3]w", ErrNotHeld, what, errHeldKeyGone)
	case at[0].Lease != s.Lease:
		return h, fmt.Errorf("%[2]s: %[1]w: %[3]w: the key created at that revision, %s, is bound to lease %s", ErrNotHeld, what, errHeldOtherRev, h.Key, schema.FormatLeaseID(at[0].Lease))
	case h.Rank < 0:
		return h, fmt.Errorf("%[2]s: %[1]w: %[3]w (%d)", ErrNotHeld, what, errHeldNotWithin, s.Max)
	}
	return h, nil
}

// attachedUnder returns the first of keys under prefix, "" if none.
func attachedUnder(keys [][]byte, prefix string) string {
	for _, k := range keys {
		if strings.HasPrefix(string(k), prefix) {
			return string(k)
		}
	}
	return ""
}
