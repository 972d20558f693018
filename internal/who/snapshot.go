package who

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
	"github.com/conch-project/conch/sema"
)

// Listing is one consistent read of semaphores: every entry (as groupAll
// classifies them) and every pause key (D16), decoded by the hostile-input
// rules of sema.Pause, in creation order, all at revision Rev.
type Listing struct {
	Rev     int64
	Entries []Entry
	Pauses  []sema.Pause
}

// snapshot reads, in one Txn, the keys of the semaphore name (every
// semaphore when name is ""), their node-wait markers (D11) and their
// pause keys (D16), and returns them as one Listing: it is the one read
// behind every form of the listing (text, JSON, metrics, watch). It does
// not check name. It blocks until etcd answers or ctx ends. Errors wrap
// sema.ErrRefused when etcd rejects the read (permissions, credentials), else
// sema.ErrUnavailable.
func snapshot(ctx context.Context, c *clientv3.Client, name string) (Listing, error) {
	roots := []string{sema.KeyRoot, sema.NodeWaitRoot, sema.PauseRoot}
	if name != "" {
		roots = []string{sema.NamePrefix(name), sema.NodeWaitRoot + name + "/", sema.PauseRoot + name + "/"}
	}
	ops := make([]clientv3.Op, 0, len(roots))
	for _, r := range roots {
		ops = append(ops, clientv3.OpGet(r, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if etcderr.Refused(err) {
		return Listing{}, fmt.Errorf("%w: cannot list %s: %w", sema.ErrRefused, roots[0], err)
	}
	if err != nil {
		return Listing{}, fmt.Errorf("%w: cannot list %s: %w", sema.ErrUnavailable, roots[0], err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	waits := resp.Responses[1].GetResponseRange().Kvs
	l := Listing{Rev: resp.Header.Revision, Entries: groupAll(kvs, waits)}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		l.Pauses = append(l.Pauses, sema.DecodePause(kv)) // never fails: garbage is kept, with Err (D16)
	}
	return l, nil
}
