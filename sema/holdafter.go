// Keeping a slot after the run (D13) and freeing such slots (D14).

package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HoldAfter ends the holding like Release, but keeps the slot taken for d
// after the run (D13): it grants a lease of TTL d (rounded up to whole
// seconds; etcd may raise it to its minimum), rebinds our key to it with a
// Put fenced on the key's create revision and on its current lease (so
// the create revision, rank and fencing token stay), writes rec as the
// value (Version, State, Ended and HeldUntil filled in; rec.Host names the
// node), then revokes our old lease, which no longer has a key. Nobody
// keeps the new lease alive: the slot frees d later by etcd's clock, or at
// the release of the node's held slots (D14, internal/fleet).
//
// The grant and the move may take until the run's lease's deadline (its
// last confirmed keep-alive plus its TTL, after which etcd may expire it with
// our key, D13d): each try waits at most 5 s, and one that gets no answer is
// tried again every 200 ms until then, as Release does (a refusal is not);
// past that deadline they go on while a member of etcd says it has no leader
// (it then expires no lease, and renews every lease at the election), up to
// d from the call (holdTries, D13f). The revoke of the old lease waits at most
// min(TTL, 5 s). It ignores ctx's cancellation (cleanup runs on a fresh
// bounded context, so a signal that ended the run cannot also cut the hold
// short). Like Release, it must be the holder's last call: when the key is
// gone or no longer on our lease, or etcd refuses, it releases the slot as
// Release does; when etcd did not answer, it revokes nothing (etcd may still
// keep the run's lease, D13f) and leaves the run's lease to expire. Either
// way it returns an error wrapping the cause (ErrKeyDeleted when the key was
// no longer ours, or ErrLeaseLost when it went with our lease's expiry, D7d),
// on one line; the HeldAfter is then zero.
func (h *Holder) HoldAfter(ctx context.Context, d time.Duration, rec schema.Record) (HeldAfter, error) {
	h.stop() // our own Put must not look like an operator's to the key's watch
	ha, err := h.rebind(ctx, d, rec, holdTries{c: h.s.c, end: h.l.deadline(), limit: time.Now().Add(RoundTTL(d))})
	if err != nil && unanswered(err) {
		// D13f: etcd did not answer, so it may still keep our lease (it expires none without a
		// leader, and renews every lease at the election): never revoked on our clock alone,
		// the lease is left to expire, within its TTL of etcd's answering again
		h.l.stop()
		h.cancel(ErrReleased)
		h.wg.Wait()
		return HeldAfter{}, fmt.Errorf("cannot keep %s after the run: %w; the slot frees when the run's lease expires, within %v of etcd's answering again", h.key, err, h.l.ttl)
	}
	if err != nil {
		if rerr := h.Release(ctx); rerr != nil {
			err = fmt.Errorf("%w; and the release failed too: %w", err, rerr)
		}
		return HeldAfter{}, fmt.Errorf("cannot keep %s after the run (released instead): %w", h.key, err)
	}
	if err := h.l.revoke(ctx, min(h.l.ttl, releaseTimeout)); err != nil {
		// the key is on the new lease already: the old one only expires later
		err = fmt.Errorf("slot kept, but %w (it expires within %v)", err, h.l.ttl)
		h.cancel(ErrReleased)
		h.wg.Wait()
		return ha, err
	}
	h.cancel(ErrReleased)
	h.wg.Wait()
	return ha, nil
}

// rebind grants the hold's lease and moves our key onto it (HoldAfter's
// first two requests, each tried as end says, holdTries.retry). The new lease is
// revoked again when the key cannot be moved.
func (h *Holder) rebind(ctx context.Context, d time.Duration, rec schema.Record, end holdTries) (HeldAfter, error) {
	var g *clientv3.LeaseGrantResponse
	// (a try that timed out may still have granted a lease: it has no key and expires after d)
	err := end.retry(ctx, func(tctx context.Context) (err error) {
		g, err = h.s.c.Grant(tctx, int64(RoundTTL(d)/time.Second))
		return err
	})
	if err != nil {
		return HeldAfter{}, fmt.Errorf("cannot grant the hold's lease: %w", err)
	}
	ended := time.Now().UTC().Truncate(time.Second)
	ttl := time.Duration(g.TTL) * time.Second
	until := ended.Add(ttl)
	rec.Version, rec.State, rec.Ended, rec.HeldUntil = schema.RecordVersion, schema.StateHeldAfter, &ended, &until
	if rec.Since.IsZero() {
		rec.Since = ended
	}
	if err := h.moveKey(ctx, rec.Encode(), g.ID, end); err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), min(h.l.ttl, releaseTimeout))
		defer rcancel()
		if _, rerr := h.s.c.Revoke(rctx, g.ID); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("%w (and the hold's lease %s expires on its own: %v)", err, schema.FormatLeaseID(int64(g.ID)), rerr)
		}
		return HeldAfter{}, err
	}
	return HeldAfter{Key: h.key, Rev: h.rev, Lease: g.ID, TTL: ttl, Node: rec.Host, Ended: ended, Until: until}, nil
}

// moveKey puts val on our key bound to lease to, if the key is still the one we created and
// still on our lease, tried as end says (holdTries.retry). A try whose answer was lost but that
// was done is recognised on the next: the key, created at our revision, is on lease to
// already. Errors: the key is no longer ours (goneErr: ErrKeyDeleted, or ErrLeaseLost after
// our lease's deadline, D7d), or etcd did not answer.
func (h *Holder) moveKey(ctx context.Context, val string, to clientv3.LeaseID, end holdTries) error {
	moved := false
	err := end.retry(ctx, func(tctx context.Context) error {
		resp, err := h.s.c.Txn(tctx).If(
			clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev),
			clientv3.Compare(clientv3.LeaseValue(h.key), "=", int64(h.l.id)),
		).Then(clientv3.OpPut(h.key, val, clientv3.WithLease(to))).Else(clientv3.OpGet(h.key)).Commit()
		if err != nil {
			return err
		}
		moved = resp.Succeeded || onLease(resp, h.rev, to)
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("cannot move %s to the hold's lease: %w", h.key, err)
	case !moved: // D7d: after a stall, the lease's expiry, not a deletion
		return fmt.Errorf("%s is no longer ours: %w", h.key, h.goneErr())
	}
	return nil
}

// onLease reports whether the key that a failed Txn's Else read was created at rev and is on
// lease to.
func onLease(resp *clientv3.TxnResponse, rev int64, to clientv3.LeaseID) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	return len(kvs) == 1 && kvs[0].CreateRevision == rev && kvs[0].Lease == int64(to)
}
