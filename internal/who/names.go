// The names in use: for a hint when a name looks mistyped.

package who

import (
	"context"
	"slices"
	"strings"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of LiveNames: each read returns up to namesPage keys (keys only) and jumps over the
// rest of the last name's keys, so a long queue costs one key; at most namesReads reads per
// root. Past that (thousands of names) the names further on are not listed.
const (
	namesPage  = 128
	namesReads = 8
)

// LiveNames returns the names of the semaphores that have keys under schema.KeyRoot
// (holders, waiters, slots kept after a run, under any capacity), a pause under
// schema.PauseRoot or a period marker under schema.OnceRoot, sorted and each once. Keys whose first segment is no valid name (foreign keys) are skipped. It reads
// keys only: the first page of each root in one Txn, then at most namesReads-1 more bounded
// reads per root that has more (see the constants), each under ctx. Errors wrap sema.ErrRefused
// when etcd rejects a read, else sema.ErrUnavailable.
func LiveNames(ctx context.Context, c *clientv3.Client) ([]string, error) {
	_, names, err := NameSurvey(ctx, c, "", schema.Record{})
	return names, err
}

// NameSurvey reports whether name has any key under its prefix (any capacity), a pause or a
// period marker (inUse) and, when it has none, LiveNames, in one Txn while each root's names
// fit one page: a mistyped name costs one request to tell (the hint beside a run). A key
// whose record is self's (same Host and PID; a zero self matches none) does not count: a run
// that asks beside its own enqueue is told the same whichever lands first. With name "" it
// is LiveNames alone. live is nil when inUse. Errors as LiveNames'.
func NameSurvey(ctx context.Context, c *clientv3.Client, name string, self schema.Record) (inUse bool, live []string, err error) {
	roots := []string{schema.KeyRoot, schema.PauseRoot, schema.OnceRoot}
	var ops []clientv3.Op
	for _, root := range roots {
		ops = append(ops, namesPageOp(root, root))
	}
	if name != "" {
		ops = append(ops, inUseOps(name)...)
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, nil, sema.EtcdFailure("cannot list the names in use", err)
	}
	for i, r := range resp.Responses[len(roots):] {
		page := r.GetResponseRange()
		if n := page.GetCount(); n > 1 || n == 1 && (i > 0 || !isSelf(page.Kvs[0].Value, self)) {
			return true, nil, nil
		}
	}
	for i, root := range roots {
		found, err := namesUnder(ctx, c, root, resp.Responses[i].GetResponseRange())
		if err != nil {
			return false, nil, err
		}
		live = append(live, found...)
	}
	slices.Sort(live)
	return false, slices.Compact(live), nil
}

// namesPageOp reads one page of the keys under root from key from on (keys only).
func namesPageOp(root, from string) clientv3.Op {
	return clientv3.OpGet(from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(root)), clientv3.WithKeysOnly(), clientv3.WithLimit(namesPage))
}

// namesUnder is LiveNames for one root, from the answer of its first page on.
func namesUnder(ctx context.Context, c *clientv3.Client, root string, page *etcdserverpb.RangeResponse) ([]string, error) {
	var names []string
	for reads := 1; ; reads++ {
		last := ""
		for _, kv := range page.Kvs {
			name, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), root), "/")
			if schema.ValidateName(name) == nil && name != last {
				names = append(names, name)
			}
			last = name
		}
		if !page.More || len(page.Kvs) == 0 || reads == namesReads {
			return names, nil
		}
		from := string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
		if schema.ValidateName(last) == nil {
			from = clientv3.GetPrefixRangeEnd(root + last + "/") // past the rest of its keys
		}
		resp, err := c.Do(ctx, namesPageOp(root, from))
		if err != nil {
			return nil, sema.EtcdFailure("cannot list "+root, err)
		}
		page = (*etcdserverpb.RangeResponse)(resp.Get())
	}
}

// inUseOps count name's keys under its prefix (schema.NamePrefix, any capacity), reading the
// first with its value, its pauses and its period markers.
func inUseOps(name string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(schema.NamePrefix(name), clientv3.WithPrefix(), clientv3.WithLimit(1)),
		clientv3.OpGet(schema.PauseRoot+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(schema.OnceRoot+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
	}
}

// isSelf reports whether value, a key's record, is self's own: the same host and process
// (self.PID 0 is nobody's).
func isSelf(value []byte, self schema.Record) bool {
	r := schema.DecodeRecord(value)
	return self.PID != 0 && r.Err == nil && r.PID == self.PID && r.Host == self.Host
}
