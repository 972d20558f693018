// One successful run per period (D15): the period's marker, read while holding before the
// work starts and written after a successful run, fenced on the holder's key.

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// Job is one semaphore's runs under their rules, as the period's reads and writes need it: the
// client the holder's semaphore uses, the semaphore (name, capacity), the rules, and the node
// that runs (the holder record's Host, named in the marker).
type Job struct {
	Client *clientv3.Client
	Name   string
	Max    int
	Rules  RunRules
	Node   string
}

// OnceMarker is a period marker as a holder reads it back (D15). It is hostile input:
// when the value cannot be read, Err says why and Raw holds its first bytes; such a
// marker still counts as present until its lease expires (never a silent double run).
type OnceMarker struct {
	schema.OnceRecord
	Key string
	// Left is how long the marker's lease has to live, by etcd's clock, as
	// of the read; -1 when the marker has no lease (written by hand: it
	// stays until deleted).
	Left time.Duration
	Err  error
	Raw  string
}

// PeriodDone reads, while h holds the job's slot and before the work starts, whether this
// period's run is done (D15: "one more read while holding"): the period's marker and the time
// its lease has left, or nil when the rules have no period, the period has had no successful
// run yet, or the marker's lease expired between the two reads. It waits at most
// min(TTL, 5 s). An error (etcd's, wrapped with the key) means the marker could not be read:
// the caller must not start the work (never a silent double run).
func (j Job) PeriodDone(ctx context.Context, h *sema.Holder) (*OnceMarker, error) {
	if j.Rules.OncePer <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.CleanupTimeout())
	defer cancel()
	key := schema.OnceKey(j.Name, j.Max)
	resp, err := j.Client.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	read := schema.DecodeMarker(kv) // as the listing reads it: the same verdict on a bad record
	m := &OnceMarker{OnceRecord: read.OnceRecord, Key: key, Left: -1, Err: read.Err, Raw: read.Raw}
	if kv.Lease == 0 {
		return m, nil
	}
	ttl, err := j.Client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ttl.TTL < 0:
		return nil, nil // expired between the two reads: no marker
	case err != nil:
		return nil, fmt.Errorf("cannot read the lease of %s: %w", key, err)
	}
	m.Left = time.Duration(ttl.TTL) * time.Second
	return m, nil
}

// ClosePeriod writes the period's marker when a run under h that ended as e closes the period
// (RunRules.ClosesPeriod), naming j.Node, the run's start (e.HeldAt) and its end (now), in
// whole seconds, UTC, and h's fencing token. Call it before h.Release or h.HoldAfter. marked
// is false with a nil error when there was nothing to write.
//
// The write is a lease of TTL OncePer (whole seconds, rounded up) and a Put of the record on
// it, fenced on h's key (it still exists with h's create revision, on h's lease), so a run
// whose slot was lost writes none. Both requests are tried as h.UntilDeadline says (until the
// run's lease's deadline: etcd cannot expire h's key before it, D13d). A Put whose answer was
// lost but that was done is recognised on the next try (the marker is on the period's lease
// already). It ignores ctx's cancellation. Errors: sema.ErrKeyDeleted when h's key is no
// longer ours (then no marker is left), or etcd's: the next run may then start at once.
func (j Job) ClosePeriod(ctx context.Context, h *sema.Holder, e RunEnd) (marked bool, err error) {
	if !j.Rules.ClosesPeriod(e) {
		return false, nil
	}
	rec := schema.OnceRecord{Node: j.Node, Start: e.HeldAt.UTC().Truncate(time.Second), End: time.Now().UTC().Truncate(time.Second)}
	if err := j.mark(ctx, h, rec); err != nil {
		return false, err
	}
	return true, nil
}

// mark writes rec as the period's marker for the run h held (ClosePeriod's write).
func (j Job) mark(ctx context.Context, h *sema.Holder, rec schema.OnceRecord) error {
	var g *clientv3.LeaseGrantResponse
	// (a try that timed out may still have granted a lease: it has no key and expires after the period)
	err := h.UntilDeadline(ctx, func(tctx context.Context) (err error) {
		g, err = j.Client.Grant(tctx, int64(sema.RoundTTL(j.Rules.OncePer)/time.Second))
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot grant the period's lease: %w", err)
	}
	rec.Version, rec.Rev = 1, h.Rev()
	b, _ := json.Marshal(rec) // plain fields: cannot fail
	key := schema.OnceKey(j.Name, j.Max)
	written := false
	err = h.UntilDeadline(ctx, func(tctx context.Context) error {
		resp, err := j.Client.Txn(tctx).If(
			clientv3.Compare(clientv3.CreateRevision(h.Key()), "=", h.Rev()),
			clientv3.Compare(clientv3.LeaseValue(h.Key()), "=", int64(h.Lease())),
		).Then(clientv3.OpPut(key, string(b), clientv3.WithLease(g.ID))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		written = resp.Succeeded || markerOnLease(resp, g.ID)
		return nil
	})
	switch {
	case err != nil:
		err = fmt.Errorf("cannot write %s: %w", key, err)
	case !written:
		err = fmt.Errorf("%w: %s, so no marker", sema.ErrKeyDeleted, h.Key())
	}
	if err != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.CleanupTimeout())
		_, _ = j.Client.Revoke(c, g.ID) // best effort: it expires after the period anyway
		cancel()
	}
	return err
}

// markerOnLease reports whether the marker that a failed Txn's Else read is bound to lease:
// an earlier try of ours wrote it, and only its answer was lost.
func markerOnLease(resp *clientv3.TxnResponse, lease clientv3.LeaseID) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	return len(kvs) == 1 && kvs[0].Lease == int64(lease)
}
