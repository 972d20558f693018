// The names in use: for a hint when a name looks mistyped.

package sema

import (
	"context"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of LiveNames: each read returns up to namesPage keys (keys only) and jumps over the
// rest of the last name's keys, so a long queue costs one key; at most namesReads reads per
// root. Past that (thousands of names) the names further on are not listed.
const (
	namesPage  = 128
	namesReads = 8
)

// LiveNames returns the names of the semaphores that have keys under KeyRoot (holders,
// waiters, slots kept after a run, under any capacity) or a pause under PauseRoot, sorted and
// each once. Keys whose first segment is no valid name (foreign keys) are skipped. It reads
// keys only, in at most namesReads bounded reads per root (see the constants), each under
// ctx. Errors wrap ErrRefused when etcd rejects a read, else ErrUnavailable.
func LiveNames(ctx context.Context, c *clientv3.Client) ([]string, error) {
	var names []string
	for _, root := range []string{KeyRoot, PauseRoot} {
		found, err := namesUnder(ctx, c, root)
		if err != nil {
			return nil, err
		}
		names = append(names, found...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// namesUnder is LiveNames for one root.
func namesUnder(ctx context.Context, c *clientv3.Client, root string) ([]string, error) {
	var names []string
	from, end := root, clientv3.GetPrefixRangeEnd(root)
	for range namesReads {
		resp, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(namesPage))
		if err != nil {
			return nil, etcdFailure("cannot list "+root, err)
		}
		last := ""
		for _, kv := range resp.Kvs {
			name, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), root), "/")
			if ValidateName(name) == nil && name != last {
				names = append(names, name)
			}
			last = name
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if ValidateName(last) == nil {
			from = clientv3.GetPrefixRangeEnd(root + last + "/") // past the rest of its keys
		}
	}
	return names, nil
}

// NameInUse reports whether name has any key under its prefix (NamePrefix, any capacity) or
// a pause (PauseRoot), in one Txn of two count-only reads under ctx. Errors wrap ErrRefused
// when etcd rejects the read, else ErrUnavailable.
func NameInUse(ctx context.Context, c *clientv3.Client, name string) (bool, error) {
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(NamePrefix(name), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(PauseRoot+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return false, etcdFailure("cannot count the keys of "+name, err)
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().GetCount() > 0 {
			return true, nil
		}
	}
	return false, nil
}
