package sema

import (
	"context"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entry is one key of a semaphore as --who shows it (D6).
type Entry struct {
	Name  string
	Max   int
	Rank  int  // 0-based rank by create revision within (Name, Max)
	Held  bool // derived from rank (Rank < Max), never from the stored value
	Key   string
	Rev   int64 // create revision: the holder's fencing token
	Lease int64
	// Record is the stored value; RecordErr is set when it is not valid JSON
	// (e.g. written by hand), in which case Record is zero.
	Record    Record
	RecordErr error
}

// List reads every key under NamePrefix(name), all capacities, in one range
// request, and returns them sorted by capacity then create revision, with
// rank and state derived per capacity (D6). A key under <name>/<max>/ that
// conch did not write is listed with RecordErr set (it takes a rank in the
// queue all the same); keys elsewhere under the name are skipped. It
// returns an etcd error wrapping ErrRefused when etcd rejects the read
// (permissions, credentials: D3's 64), else ErrUnavailable when it fails.
func List(ctx context.Context, c *clientv3.Client, name string) ([]Entry, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	resp, err := c.Get(ctx, NamePrefix(name), clientv3.WithPrefix(), byCreateAsc)
	if Refused(err) {
		return nil, fmt.Errorf("%w: cannot list %s: %w", ErrRefused, NamePrefix(name), err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot list %s: %w", ErrUnavailable, NamePrefix(name), err)
	}
	var out []Entry
	for _, kv := range resp.Kvs {
		max, lease, ok := parseKey(name, string(kv.Key))
		if !ok {
			// a key under <name>/<max>/ that conch did not write still
			// takes a rank in the recipe: show it, or --who would lie
			m, _, found := strings.Cut(strings.TrimPrefix(string(kv.Key), NamePrefix(name)), "/")
			if max, err := ParseMax(m); found && err == nil {
				out = append(out, Entry{Name: name, Max: max, Key: string(kv.Key), Rev: kv.CreateRevision,
					RecordErr: fmt.Errorf("%s is not a conch key", kv.Key)})
			}
			continue
		}
		rec, rerr := decodeRecord(kv.Value)
		out = append(out, Entry{Name: name, Max: max, Key: string(kv.Key), Rev: kv.CreateRevision,
			Lease: lease, Record: rec, RecordErr: rerr})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Max != out[j].Max {
			return out[i].Max < out[j].Max
		}
		return out[i].Rev < out[j].Rev
	})
	rank := map[int]int{}
	for i := range out {
		e := &out[i]
		e.Rank = rank[e.Max]
		e.Held = e.Rank < e.Max
		rank[e.Max]++
	}
	return out, nil
}
