// Freeing the slots a node holds after its runs (D14).

package fleet

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// HeldRelease is what ReleaseHeld did: the slots it freed, and the keys it left alone
// because their record, which names the node and says held-after, is of a newer format than
// this package reads (schema.Record.Version above schema.RecordVersion, D14a): a writer that knows more may
// mean something else by it.
type HeldRelease struct {
	Freed []sema.HeldAfter
	Left  []sema.HeldAfter
}

// ReleaseHeld frees the slots of (name, max) that node holds after a
// run (D14): it reads the semaphore's keys and deletes each one whose record
// says schema.StateHeldAfter and names node as its host, in one Txn per key,
// conditional on the key's mod revision as read, so a key rewritten since
// (a supervised run's own key is never held-after) is never touched, nor
// another node's, nor one whose record is of a newer format (D14a: left
// alone and returned in Left). None freed is not an error.
// Errors wrap schema.ErrBadName or schema.ErrBadMax for bad arguments, sema.ErrRefused when
// etcd rejects a request, else sema.ErrUnavailable.
func ReleaseHeld(ctx context.Context, c *clientv3.Client, name string, max int, node string) (HeldRelease, error) {
	var rel HeldRelease
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return rel, err
	}
	resp, err := c.Get(ctx, schema.Prefix(name, max), clientv3.WithPrefix(), byCreateAsc)
	if err != nil {
		return rel, sema.EtcdFailure("cannot list "+schema.Prefix(name, max), err)
	}
	for _, kv := range resp.Kvs {
		r := schema.DecodeRecord(kv.Value)
		switch {
		case !(r.Err == nil && r.IsHeldAfter()) || r.Host != node:
			continue
		case r.Newer: // D14a: not ours to judge
			rel.Left = append(rel.Left, sema.HeldAfterOf(kv, r))
			continue
		}
		resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return rel, sema.EtcdFailure(fmt.Sprintf("cannot delete %s", kv.Key), err)
		}
		if resp.Succeeded {
			rel.Freed = append(rel.Freed, sema.HeldAfterOf(kv, r))
		}
	}
	return rel, nil
}
