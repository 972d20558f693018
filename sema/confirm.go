// A promoted waiter confirms its lease before it holds (D7i).

package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// confirmOnce confirms the lease with a keep-alive of its own, each try bounded by iv, for a
// waiter promoted on a stale confirmation (startFencing). A try that gets no answer (a member
// without a leader, a connection that went silent) is sent again every kaRetry, on a new
// stream (which the client's round robin may put on another connection), while the lease
// may still live: until its deadline on our own clock less one try. Only the server's word
// ends it: "not found" (or a TTL of 0) is ErrLeaseLost; running out of time, or ctx ending,
// is ErrFenced with the last try's error. A confirmed try moves the lease's deadline.
func (l *lease) confirmOnce(ctx context.Context, iv time.Duration) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, iv)
		sent := time.Now()
		resp, err := l.c.KeepAliveOnce(cctx, l.id)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			l.fail(ErrLeaseLost)
			return ErrLeaseLost
		case err == nil:
			l.confirm(sent)
			return nil
		}
		if ctx.Err() != nil || time.Until(l.deadline()) < iv+kaRetry {
			return fmt.Errorf("%w: %w", ErrFenced, err)
		}
		if !sleepCtx(ctx, kaRetry) {
			return fmt.Errorf("%w: %w", ErrFenced, err)
		}
	}
}

// confirmedAt is the send time of the last confirmed keep-alive.
func (l *lease) confirmedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed
}
