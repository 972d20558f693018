// A waiter's lease grant tried again off a member that does not answer (D7b (3)).

package sema

import (
	"context"
	"errors"
	"time"

	"github.com/conch-project/conch/internal/etcderr"
)

// grantTry bounds one try of a waiter's lease grant. A grant that went to a member that
// accepts connections but does not answer (stopped, frozen, cut off without a reset, or
// a member being replaced that has not joined yet) is given up after it and sent again, on
// the next connection of the client's round robin, instead of being waited on until ctx
// ends: at start that was the whole ConnectTimeout, and the run gave up on etcd as
// unreachable while the other members answered. It is generous for a grant (one raft
// proposal) on a loaded etcd, so a slow but live member is not given up every time.
const grantTry = 2 * time.Second

// grantTried grants the semaphore's lease (grantLease) in tries of at most grantTry each
// while ctx lives. A try that timed out may have committed: its lease, which nobody keeps
// alive and no key names, expires after the TTL. It returns the lease, or the last try's
// error: a refusal at once (etcderr.Refused), else when ctx ends.
func (s *Semaphore) grantTried(ctx context.Context) (*lease, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, grantTry)
		l, err := grantLease(tctx, s.c, s.opts.TTL)
		cancel()
		if err == nil || etcderr.Refused(err) || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return l, err
		}
	}
}
