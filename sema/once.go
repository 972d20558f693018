// One successful run per period (D15): the period's marker.

package sema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// OnceRoot is the prefix of the period markers, outside KeyRoot so no
// ranking read counts one (D15).
const OnceRoot = "/conch/v1/once/"

// OnceKey is the period marker of the semaphore (name, max) (D15).
func OnceKey(name string, max int) string { return OnceRoot + name + "/" + strconv.Itoa(max) }

// OnceRecord is the value of a period marker: the successful run that
// wrote it (D15).
type OnceRecord struct {
	Version int       `json:"v"`
	Node    string    `json:"node"`
	Rev     int64     `json:"rev"` // the run's fencing token
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// OnceMarker is a period marker as read back (D15). It is hostile input:
// when the value cannot be read, Err says why and Raw holds its first
// bytes; such a marker still counts as present until its lease expires
// (never a silent double run).
type OnceMarker struct {
	OnceRecord
	Key string
	// Left is how long the marker's lease has to live, by etcd's clock, as
	// of the read; -1 when the marker has no lease (written by hand: it
	// stays until deleted).
	Left time.Duration
	Err  error
	Raw  string
}

// ReadOnce reads the semaphore's period marker while h holds its slot,
// and the time its lease has left (D15: "one more read while holding").
// It returns nil when there is none. Errors: etcd's, wrapped with the key.
func (h *Holder) ReadOnce(ctx context.Context) (*OnceMarker, error) {
	key := OnceKey(h.s.name, h.s.max)
	resp, err := h.s.c.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	m := &OnceMarker{Key: key, Left: -1}
	if err := json.Unmarshal(kv.Value, &m.OnceRecord); err != nil || m.Node == "" || m.End.IsZero() {
		m.OnceRecord = OnceRecord{}
		m.Err = errors.New("not a marker record (JSON object with node and end)")
		m.Raw = string(kv.Value[:min(len(kv.Value), 64)])
	}
	if kv.Lease == 0 {
		return m, nil
	}
	ttl, err := h.s.c.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ttl.TTL < 0:
		return nil, nil // expired between the two reads: no marker
	case err != nil:
		return nil, fmt.Errorf("cannot read the lease of %s: %w", key, err)
	}
	m.Left = time.Duration(ttl.TTL) * time.Second
	return m, nil
}

// MarkOnce writes the period marker for the run h held (D15): a lease of
// TTL period (whole seconds, rounded up) and a Put of rec on it, fenced on
// our key (it still exists with our create revision, on our lease), so a run
// whose slot was lost writes none. Call it only after a successful run,
// before Release. The grant and the Put may take until the run's lease's
// deadline (its last confirmed keep-alive plus its TTL: etcd cannot expire
// our key before it), as the hold's move does (D13d): each try waits at most
// 5 s, and one that gets no answer is tried again every 200 ms until then (a
// refusal is not). A Put whose answer was lost but that was done is
// recognised on the next try (the marker is on the period's lease already).
// It ignores ctx's cancellation. Errors: ErrKeyDeleted when our key is no
// longer ours (then no marker is left), or etcd's.
func (h *Holder) MarkOnce(ctx context.Context, period time.Duration, rec OnceRecord) error {
	end := h.l.deadline()
	var g *clientv3.LeaseGrantResponse
	// (a try that timed out may still have granted a lease: it has no key and expires after the period)
	err := untilDeadline(ctx, end, func(tctx context.Context) (err error) {
		g, err = h.s.c.Grant(tctx, int64(RoundTTL(period)/time.Second))
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot grant the period's lease: %w", err)
	}
	rec.Version, rec.Rev = 1, h.rev
	b, _ := json.Marshal(rec) // plain fields: cannot fail
	key := OnceKey(h.s.name, h.s.max)
	written := false
	err = untilDeadline(ctx, end, func(tctx context.Context) error {
		resp, err := h.s.c.Txn(tctx).If(
			clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev),
			clientv3.Compare(clientv3.LeaseValue(h.key), "=", int64(h.l.id)),
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
		err = fmt.Errorf("%w: %s, so no marker", ErrKeyDeleted, h.key)
	}
	if err != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(h.l.ttl, releaseTimeout))
		_, _ = h.s.c.Revoke(c, g.ID) // best effort: it expires after the period anyway
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
