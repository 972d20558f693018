// The one capacity of a name (D17): a run, a pause, a resume or a release
// that names a capacity other than the live one(s) is refused.

package sema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
	"github.com/conch-project/conch/sema/schema"
)

// ErrOtherCapacity: keys of the same name live under another capacity, and
// the caller did not ask to run beside them (D17). Returned as a
// *CapacityError, which names them.
var ErrOtherCapacity = errors.New("the name is live under another capacity")

// CapacityError is ErrOtherCapacity with what was read: the semaphore asked
// for and the capacities that have conch's keys under its name (D17).
type CapacityError struct {
	Name string
	Max  int   // the capacity asked for
	Live []int // the capacities with conch's keys, ascending, Max excluded
}

// Error names the semaphore and the live capacities.
func (e *CapacityError) Error() string {
	return fmt.Sprintf("%s[max=%d]: %s is live with %s", e.Name, e.Max, e.Name, CapacityList(e.Live))
}

// Unwrap makes errors.Is(err, ErrOtherCapacity) hold.
func (e *CapacityError) Unwrap() error { return ErrOtherCapacity }

// CapacityList spells capacities as messages do: "max=2", "max=2 and max=3",
// "max=1, max=2 and max=4".
func CapacityList(caps []int) string {
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = "max=" + strconv.Itoa(c)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// maxCapacityReads bounds LiveCapacities' reads: one per capacity found and
// one per key skipped that is not conch's (D6g). A name with more is not one anybody
// runs on purpose; the capacities past it go unnamed.
const maxCapacityReads = 64

// LiveCapacities returns the capacities that have keys conch wrote
// (ConchWrote: holders, waiters, slots kept after a run) under name, ascending,
// and the revision they were read at; keys that are not conch's (foreign,
// unexpected, bound to no lease) make no capacity live (D6g). It does one
// read of one key per capacity (jumping over the rest of a
// capacity's queue once one of its keys is conch's), and one per key skipped, at most maxCapacityReads in all, each at the revision of the
// first: the queues' lengths cost nothing. Pause and once-per markers live
// outside the name's prefix and are not counted. Errors wrap ErrBadName,
// ErrRefused when etcd rejects a read, else ErrUnavailable.
func LiveCapacities(ctx context.Context, c *clientv3.Client, name string) ([]int, int64, error) {
	if err := schema.ValidateName(name); err != nil {
		return nil, 0, err
	}
	from, end := schema.NamePrefix(name), clientv3.GetPrefixRangeEnd(schema.NamePrefix(name))
	var caps []int
	var rev int64
	for range maxCapacityReads {
		// not keys-only: etcd answers those from its index, without the key's lease
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, EtcdFailure("cannot list "+schema.NamePrefix(name), err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		if len(resp.Kvs) == 0 {
			break
		}
		key := string(resp.Kvs[0].Key)
		info := schema.ParseKey(name, key)
		if !schema.ConchWrote(info.Kind, resp.Kvs[0].Lease) { // D6g: not conch's, no capacity's key; step past it
			from = key + "\x00"
			continue
		}
		caps = append(caps, info.Max)
		from = clientv3.GetPrefixRangeEnd(schema.Prefix(name, info.Max))
	}
	slices.Sort(caps)
	return caps, rev, nil
}

// CheckCapacity returns a *CapacityError when name has conch's keys under a
// capacity other than max (D17), nil when it has none or only max's. It
// reads as LiveCapacities, whose errors it returns. For the commands that
// change a semaphore without queueing (a pause, a resume, a release): the
// keys may change after the read; a run checks at its enqueue's own revision.
func CheckCapacity(ctx context.Context, c *clientv3.Client, name string, max int) error {
	caps, _, err := LiveCapacities(ctx, c, name)
	if err != nil {
		return err
	}
	if others := otherThan(caps, max); len(others) > 0 {
		return &CapacityError{Name: name, Max: max, Live: others}
	}
	return nil
}

// otherThan is caps without max.
func otherThan(caps []int, max int) []int {
	return slices.DeleteFunc(slices.Clone(caps), func(c int) bool { return c == max })
}

// OtherCapacityCmps are the compares a write's Txn adds so that it is done only when no key
// lies under the name outside (name, max)'s prefix (D17): a pause's write adds them (a hook
// for the layer that sets pauses, internal/fleet): the ranges
// [NamePrefix, prefix) and [end of prefix, end of NamePrefix) are empty. etcd applies a
// compare on a range to every key in it, and to none when it is empty (then CreateRevision
// = 0 holds). (The enqueue does not use them: they cost each enqueue a range read on the
// server; it reads the count under the name at its own revision instead, writeKey.)
func OtherCapacityCmps(name string, max int) []clientv3.Cmp {
	np, p := schema.NamePrefix(name), schema.Prefix(name, max)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(np), "=", 0).WithRange(p),
		clientv3.Compare(clientv3.CreateRevision(clientv3.GetPrefixRangeEnd(p)), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(np)),
	}
}

// capacityRefusal decides what the keys the enqueue counted under the name
// outside our capacity are: a *CapacityError when they include conch's keys
// of another capacity (D17), nil when they are only foreign keys (D6g: not a
// capacity) or gone already. Errors of the read as LiveCapacities', wrapping
// errEtcd unless etcd refused it.
func (s *Semaphore) capacityRefusal(ctx context.Context) error {
	err := CheckCapacity(ctx, s.c, s.name, s.max)
	if err != nil && !errors.Is(err, ErrOtherCapacity) && !etcderr.Refused(err) {
		return fmt.Errorf("%w: %w", errEtcd, err)
	}
	return err
}

// othersAreCapacities is capacityRefusal for the enqueue's ranking r, whose others counts the
// keys under the name outside our capacity: when they are no other capacity's (D6g: keys
// that are not conch's, or gone already) r.others becomes 0, so the Enqueued event names no
// other capacity. With Options.AllowOtherCapacity another live capacity is no error (the
// Enqueued event warns of it), nor is a failed read (r.others is then kept as counted).
// Errors otherwise as capacityRefusal's.
func (s *Semaphore) othersAreCapacities(ctx context.Context, r *ranking) error {
	err := s.capacityRefusal(ctx)
	switch {
	case err == nil:
		r.others = 0
	case s.opts.AllowOtherCapacity:
		err = nil
	}
	return err
}
