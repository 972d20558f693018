// D11's warning: lease keys and node keys mixed under one (name, max).

package sema

import (
	"context"
	"slices"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// otherKind counts the distinct keys of kvs (the enqueue's reads) that are of
// the other kind than key (KeyLease against KeySpread, by ParseKey) and that
// conch wrote (ConchWrote: a key bound to no lease was written by hand and
// says nothing of how jobs run, D6g): D11's warning. The reads are O(max), so
// keys of the other kind deeper in the queue go unseen: the warning covers the
// holders and our neighbour, not the whole queue (D2).
//
// The enqueue's reads are keys-only, and etcd answers those from its index,
// without the keys' leases: when keys of the other kind are among them, one
// more read (one Txn of those keys) fetches their leases. If it fails the
// keys are counted by their names alone: the warning is advice, not worth
// failing an enqueue that committed.
func (s *Semaphore) otherKind(ctx context.Context, key string, kvs ...[]*mvccpb.KeyValue) int {
	other := schema.KeySpread
	if schema.ParseKey(s.name, key).Kind == schema.KeySpread {
		other = schema.KeyLease
	}
	var keys []string
	for _, list := range kvs {
		for _, kv := range list {
			if k := string(kv.Key); schema.ParseKey(s.name, k).Kind == other && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return 0
	}
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	resp, err := s.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return len(keys)
	}
	n := 0
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			if schema.ConchWrote(other, kv.Lease) {
				n++
			}
		}
	}
	return n
}
