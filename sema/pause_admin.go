package sema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PauseVersion is the format version written in every pause record.
const PauseVersion = 1

// SetPause pauses the semaphore (name, max) (D16): it writes the pause key,
// with no lease, holding who (user@node), now and reason, unless a pause is
// already there. It returns the pause in force and whether this call wrote
// it (false: already paused, left as it was: idempotent). It writes nothing
// while conch's keys of the name live under another capacity (D17), checked
// in the write's own Txn: a *CapacityError (ErrOtherCapacity). Errors also
// wrap ErrBadName or ErrBadMax, ErrRefused when etcd rejects the write,
// else ErrUnavailable.
func SetPause(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string) (Pause, bool, error) {
	return setPause(ctx, c, name, max, who, reason, true)
}

// SetPauseAnyCapacity is SetPause without D17's check: for a deliberate
// change of capacity, the pause of a capacity that is not (yet) the live one.
func SetPauseAnyCapacity(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string) (Pause, bool, error) {
	return setPause(ctx, c, name, max, who, reason, false)
}

// setPause is SetPause, with D17's compares when guard is set.
func setPause(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string, guard bool) (Pause, bool, error) {
	if err := validateSem(name, max); err != nil {
		return Pause{}, false, err
	}
	key := PauseKey(name, max)
	p := Pause{Name: name, Max: max, Key: key, V: PauseVersion, Who: who, Since: time.Now().UTC().Truncate(time.Second), Reason: reason}
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: strings and a time
		return Pause{}, false, err
	}
	for {
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		if guard {
			cmps = append(cmps, otherCapacityCmps(name, max)...)
		}
		resp, err := c.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return Pause{}, false, etcdFailure("cannot write "+key, err)
		}
		if resp.Succeeded {
			p.Rev = resp.Header.Revision
			return p, true, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return DecodePause(kvs[0]), false, nil
		}
		// D17: keys under the name outside this capacity
		if err := CheckCapacity(ctx, c, name, max); err != nil {
			return Pause{}, false, err
		}
		guard = false // only foreign keys (D6g), or gone since: no capacity of theirs to refuse for
	}
}

// Resume deletes the pause of (name, max) (D16), whatever its value. It
// returns the pause it deleted and whether there was one (false: not
// paused, nothing done: idempotent). Waiters that the pause kept wake,
// at most max of them (D1). Errors as SetPause's.
func Resume(ctx context.Context, c *clientv3.Client, name string, max int) (Pause, bool, error) {
	if err := validateSem(name, max); err != nil {
		return Pause{}, false, err
	}
	key := PauseKey(name, max)
	resp, err := c.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return Pause{}, false, etcdFailure("cannot delete "+key, err)
	}
	if len(resp.PrevKvs) == 0 {
		return Pause{}, false, nil
	}
	return DecodePause(resp.PrevKvs[0]), true, nil
}

// validateSem checks a semaphore's name and capacity (D4): errors wrap
// ErrBadName or ErrBadMax.
func validateSem(name string, max int) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if max < 1 || max > MaxCapacity {
		return fmt.Errorf("%w %d: must be 1..%d", ErrBadMax, max, MaxCapacity)
	}
	return nil
}
