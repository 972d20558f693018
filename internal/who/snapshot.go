package who

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// Listing is one consistent read of semaphores: every entry (as groupAll
// classifies them) and every pause key (D16), decoded by the hostile-input
// rules of schema.Pause, in creation order, all at revision Rev.
type Listing struct {
	Rev     int64
	Entries []Entry
	Pauses  []schema.Pause
	// Once are the period markers of --once-per (D15): the run that closed each period
	Once []schema.Marker
}

// snapshot reads, in one Txn, the keys of the semaphore name (every
// semaphore when name is ""), their node-wait markers (D11), their
// pause keys (D16) and their period markers (D15), and returns them as one Listing: it is the one read
// behind every form of the listing (text, JSON, metrics, watch). It does
// not check name. It blocks until etcd answers or ctx ends. Errors wrap
// sema.ErrRefused when etcd rejects the read (permissions, credentials), else
// sema.ErrUnavailable.
func snapshot(ctx context.Context, c *clientv3.Client, name string) (Listing, error) {
	roots := listingRoots(name)
	ops := make([]clientv3.Op, 0, len(roots))
	for _, r := range roots {
		ops = append(ops, clientv3.OpGet(r, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return Listing{}, sema.EtcdFailure("cannot list "+roots[0], err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	waits := resp.Responses[1].GetResponseRange().Kvs
	l := Listing{Rev: resp.Header.Revision, Entries: groupAll(kvs, waits)}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		l.Pauses = append(l.Pauses, schema.DecodePause(kv)) // never fails: garbage is kept, with Err (D16)
	}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		l.Once = append(l.Once, schema.DecodeMarker(kv)) // never fails, as a pause (D15)
	}
	return l, nil
}

// listingRoots are the prefixes snapshot reads (and --watch watches) for the semaphore name,
// every semaphore when name is "": its keys, its node-wait markers (D11), its pause keys
// (D16) and its period markers (D15), in that order.
func listingRoots(name string) []string {
	if name == "" {
		return []string{schema.KeyRoot, schema.NodeWaitRoot, schema.PauseRoot, schema.OnceRoot}
	}
	return []string{schema.NamePrefix(name), schema.NodeWaitRoot + name + "/", schema.PauseRoot + name + "/", schema.OnceRoot + name + "/"}
}
