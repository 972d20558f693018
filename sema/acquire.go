// Acquire: the lives of our key until a slot is held or the wait gives up;
// verdict.go decides what a wait that got no slot means (D3).

package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
)

// startContext returns a context that ends after d or when ctx is cancelled,
// but not when ctx's deadline passes (see Acquire). The CancelFunc releases
// it.
func startContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) { // a signal, not the wait's end
			cancel()
		}
	})
	return sctx, func() { stop(); cancel() }
}

// probeTimeout bounds the last request that decides, when a wait ended, whether etcd
// answered (a time-out) or not (an outage): min(ConnectTimeout, 2 s).
func (s *Semaphore) probeTimeout() time.Duration { return min(s.opts.ConnectTimeout, 2*time.Second) }

// Acquire enqueues and blocks until a slot is held, then returns the Holder,
// whose Release the caller must call. ctx bounds the wait only (the caller's bound on it); the
// Holder outlives it.
//
// Errors: ErrUnavailable if the first request gets no answer within
// ConnectTimeout while ctx lives (etcd unreachable at start). Once the wait
// ends without a slot, a *WaitError, the one verdict of D3 (a time-out or an outage): with
// Unreachable false (errors.Is ErrTimeout, or ErrNoSlot with Nonblock) when ctx
// ended, or Nonblock found no free slot, while etcd answered (a slot free at
// enqueue is had even if ctx's deadline has passed, as with Nonblock); with
// Unreachable true (errors.Is ErrUnavailable) when etcd did not answer as the
// wait ended, the first request's ConnectTimeout included. ErrRefused at once when etcd rejects a
// request for good (permission denied, bad credentials, a TTL it does not
// grant): retrying cannot help. A *CapacityError (ErrOtherCapacity) at once when
// conch's keys of the name live under another capacity and Options.AllowOtherCapacity is
// not set (D17): our key, written at that revision, is taken back. In each case our key is deleted before
// Acquire returns (best effort when etcd is down: then it goes at lease
// expiry; ErrTimeout always means it is gone, D3). A lost lease or a deleted key while
// queued re-enters at the back of the queue (Reentering event) while ctx
// allows (04_sema.md "Failure behavior"; D7 for operator deletes).
func (s *Semaphore) Acquire(ctx context.Context) (*Holder, error) {
	a := &acquiring{s: s, first: true, backoff: retryMin}
	// The first grant and enqueue are bounded by ConnectTimeout and by ctx's
	// cancellation, not by its deadline: a slot that is free at once is had
	// however short the wait (as with Nonblock), and at start etcd gets
	// ConnectTimeout whatever the wait says (D3).
	startCtx, cancelStart := startContext(ctx, s.opts.ConnectTimeout)
	defer cancelStart()
	for {
		gctx := ctx
		if a.first {
			gctx = startCtx
		}
		l, err := s.grantTried(gctx) // off a member that does not answer (D7b (3))
		if err != nil {
			if err := a.grantFailed(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		l.setWaitInterval(s.opts.WaitKeepAlive)
		l.setOnReach(s.reach) // D7g
		// our new key must not queue behind our own old one
		a.stale = s.revokeIDs(ctx, a.stale, giveUpTimeout)
		h, err := s.enqueueAndWait(gctx, ctx, l)
		a.first = false
		if err == nil {
			if len(a.stale) > 0 { // an old key of ours may take a slot: try once more
				s.revokeIDs(ctx, a.stale, giveUpTimeout)
			}
			return h, nil
		}
		ctx = markGiveUp(ctx) // (a no-op while the wait goes on; see giveup.go)
		if l.revoke(ctx, giveUpWithin(ctx, min(l.ttl, giveUpTimeout))) != nil {
			a.stale = append(a.stale, l.id)
		}
		if err := a.queueFailed(ctx, err); err != nil {
			return nil, err
		}
	}
}

// acquiring is one Acquire's state across its lives (a life: one lease and its key).
type acquiring struct {
	s       *Semaphore
	first   bool               // no life has been enqueued yet
	backoff time.Duration      // the next retry's pause
	stale   []clientv3.LeaseID // leases of earlier lives whose revoke failed
}

// grantFailed decides what a failed lease grant means: nil to try again (after a pause
// while ctx allows), or Acquire's error: ErrRefused, ErrUnavailable at the very start, or
// the wait's verdict (a time-out if etcd answers, an outage if not; D3).
func (a *acquiring) grantFailed(ctx context.Context, err error) error {
	s := a.s
	switch {
	case etcderr.Refused(err):
		return fmt.Errorf("%w: %s: %w", ErrRefused, s.name, err)
	case a.first && errors.Is(ctx.Err(), context.DeadlineExceeded): // the wait ran out at start
		return s.verdict(ctx, waitEnd{unanswered: err, atStart: true})
	case a.first && ctx.Err() == nil:
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, s.name, err)
	case ctx.Err() != nil || !sleepCtx(ctx, a.backoff):
		// no key now: a time-out if etcd answers, an outage otherwise (D3)
		return s.verdict(ctx, waitEnd{stale: a.stale, unanswered: err})
	}
	a.backoff = min(2*a.backoff, retryMax)
	return nil
}

// queueFailed decides what the end of a life that did not hold means (our lease is already
// revoked, or in a.stale): nil to re-enter at the back (04_sema.md "Failure behavior"), or
// Acquire's error: ErrRefused, or the verdict for Nonblock or the wait's end.
func (a *acquiring) queueFailed(ctx context.Context, err error) error {
	s := a.s
	switch {
	case etcderr.Refused(err):
		return fmt.Errorf("%w: %s: %w", ErrRefused, s.name, err)
	case errors.Is(err, ErrOtherCapacity): // D17: nothing of ours was written
		return err
	case errors.Is(err, ErrNoSlot):
		return s.verdict(ctx, waitEnd{stale: a.stale, nonblock: true, nodeBusy: errors.Is(err, errNodeHasKey), paused: pauseOf(err)})
	case ctx.Err() != nil:
		return s.verdict(ctx, waitEnd{stale: a.stale})
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrKeyDeleted):
		s.emit(Event{Kind: Reentering, Err: err})
		a.backoff = retryMin
		return nil
	}
	// etcd errors while queued (or at promotion): retry
	s.emit(Event{Kind: Reentering, Err: err})
	if !sleepCtx(ctx, a.backoff) {
		return s.verdict(ctx, waitEnd{stale: a.stale})
	}
	a.backoff = min(2*a.backoff, retryMax)
	return nil
}

// revokeIDs revokes each lease of ids (their keep-alives already stopped),
// each within d of a fresh context (it works after ctx ended), and returns
// those etcd did not take back. A lease etcd no longer knows is gone.
func (s *Semaphore) revokeIDs(ctx context.Context, ids []clientv3.LeaseID, d time.Duration) []clientv3.LeaseID {
	var left []clientv3.LeaseID
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		_, err := s.c.Revoke(rctx, id)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			left = append(left, id)
		}
	}
	return left
}

// sleepCtx waits d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
