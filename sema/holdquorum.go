// The hold's requests through a loss of etcd's quorum (D13f).

package sema

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
)

// noLeaderWindow is how long after etcd last said it has no leader the hold's requests go on
// past the run's lease's deadline: long enough for a try on each of three members, two of
// them silent (a try past the deadline waits releaseTry, 1 s).
const noLeaderWindow = 3 * time.Second

// holdTries bounds the tries of the hold's grant and move (HoldAfter) on c: until end, the
// run's lease's deadline on our own clock, as the release does (D13d); past it, on while a
// member of etcd said within noLeaderWindow that it has no leader, up to limit (when the hold
// would be over). A member without a leader expires no lease, and a new leader renews every
// lease by a whole TTL, so the run's lease, and our key with it, is still there when the
// quorum comes back, however long it was lost; each request is fenced on our key, so a try
// that comes too late changes nothing (D13f).
type holdTries struct {
	c          *clientv3.Client
	end, limit time.Time
}

// retry runs try as untilDeadline does, and goes on past t.end while etcd says it has no
// leader (holdTries). clientv3 retries a request that a member without a leader refuses
// until the request's own deadline, so that answer never reaches us: each round past t.end
// asks the members (leaderless) instead. It returns the last try's error.
func (t holdTries) retry(ctx context.Context, try func(context.Context) error) error {
	var heard time.Time // when a member last said it had no leader
	end := t.end
	for {
		err := untilDeadline(ctx, end, try)
		if err == nil || !unanswered(err) || !time.Now().Before(t.limit) {
			return err
		}
		if t.leaderless(ctx) {
			heard = time.Now()
		}
		if time.Since(heard) > noLeaderWindow {
			return err
		}
		end = time.Now().Add(releaseRetry) // one more round: the quorum may be back
	}
}

// leaderless reports whether a member of t.c's endpoints answers, within releaseTry, that it
// knows no leader (its status: served from its own memory, without a Raft round).
func (t holdTries) leaderless(ctx context.Context) bool {
	eps := t.c.Endpoints()
	found := make(chan bool, len(eps))
	for _, ep := range eps {
		go func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTry)
			defer cancel()
			resp, err := t.c.Status(sctx, ep)
			found <- err == nil && resp.Leader == 0
		}()
	}
	any := false
	for range eps {
		any = <-found || any
	}
	return any
}

// unanswered reports whether err is a request's failure for want of an answer from etcd (no
// leader, no connection, a deadline), as opposed to etcd's answer that our key or lease is
// gone, or a refusal.
func unanswered(err error) bool {
	return err != nil && !errors.Is(err, ErrKeyDeleted) && !errors.Is(err, ErrLeaseLost) && !etcderr.Refused(err)
}
