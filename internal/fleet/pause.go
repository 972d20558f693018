// Pausing a semaphore (D16): the pause key's administration. The gate the ranking reads and
// the head follows is sema's (pause.go there); this writes and deletes its key.

package fleet

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// SetPause pauses the semaphore (name, max) (D16): it writes the pause key,
// with no lease, holding who (user@node), now and reason, unless a pause is
// already there. It returns the pause in force and whether this call wrote
// it (false: already paused, left as it was: idempotent). It writes nothing
// while conch's keys of the name live under another capacity (D17), checked
// in the write's own Txn: a *sema.CapacityError (sema.ErrOtherCapacity). Errors also
// wrap schema.ErrBadName or schema.ErrBadMax, sema.ErrRefused when etcd rejects the write,
// else sema.ErrUnavailable.
func SetPause(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string) (schema.Pause, bool, error) {
	return setPause(ctx, c, name, max, who, reason, true)
}

// SetPauseAnyCapacity is SetPause without D17's check: for a deliberate
// change of capacity, the pause of a capacity that is not (yet) the live one.
func SetPauseAnyCapacity(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string) (schema.Pause, bool, error) {
	return setPause(ctx, c, name, max, who, reason, false)
}

// setPause is SetPause, with D17's compares when guard is set.
func setPause(ctx context.Context, c *clientv3.Client, name string, max int, who, reason string, guard bool) (schema.Pause, bool, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return schema.Pause{}, false, err
	}
	key := schema.PauseKey(name, max)
	p := schema.Pause{Name: name, Max: max, Key: key, V: schema.PauseVersion, Who: who, Since: time.Now().UTC().Truncate(time.Second), Reason: reason}
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: strings and a time
		return schema.Pause{}, false, err
	}
	for {
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		if guard {
			cmps = append(cmps, sema.OtherCapacityCmps(name, max)...)
		}
		resp, err := c.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return schema.Pause{}, false, sema.EtcdFailure("cannot write "+key, err)
		}
		if resp.Succeeded {
			p.Rev = resp.Header.Revision
			return p, true, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return schema.DecodePause(kvs[0]), false, nil
		}
		// D17: keys under the name outside this capacity
		if err := sema.CheckCapacity(ctx, c, name, max); err != nil {
			return schema.Pause{}, false, err
		}
		guard = false // only foreign keys (D6g), or gone since: no capacity of theirs to refuse for
	}
}

// Resume deletes the pause of (name, max) (D16), whatever its value. It
// returns the pause it deleted and whether there was one (false: not
// paused, nothing done: idempotent). Waiters that the pause kept wake,
// at most max of them (D1). Errors as SetPause's.
func Resume(ctx context.Context, c *clientv3.Client, name string, max int) (schema.Pause, bool, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return schema.Pause{}, false, err
	}
	key := schema.PauseKey(name, max)
	resp, err := c.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return schema.Pause{}, false, sema.EtcdFailure("cannot delete "+key, err)
	}
	if len(resp.PrevKvs) == 0 {
		return schema.Pause{}, false, nil
	}
	return schema.DecodePause(resp.PrevKvs[0]), true, nil
}
