// The hooks sema offers the layers above it (internal/fleet): requests they make while a
// holder holds, bounded as the holder's own closing requests are. The gate the ranking
// reads, the pause (D16), is the other hook: pause.go.

package sema

import (
	"context"
	"time"
)

// UntilDeadline runs try as the holder's own closing requests are run (HoldAfter's grant and
// move, D13d): each try within min(5 s, what is left before the lease's deadline, its last
// confirmed keep-alive plus its TTL) but at least 1 s, so one try is made even at the
// deadline, and again every 200 ms while it fails for want of an answer and the deadline has
// not come; a refusal (etcd rejected the request for good) is not tried again. A write fenced
// on our key that is done by then cannot outlive the key: etcd cannot expire the key before
// that deadline. It ignores ctx's cancellation (each try runs on a fresh context bounded as
// said, carrying ctx's values) and blocks until the last try returns; it returns that try's
// error, nil when one succeeded.
func (h *Holder) UntilDeadline(ctx context.Context, try func(context.Context) error) error {
	return untilDeadline(ctx, h.l.deadline(), try)
}

// CleanupTimeout bounds a best-effort cleanup request made for the holder (a revoke of a lease
// that was granted for nothing): min(TTL, 5 s), as Release's own revoke.
func (h *Holder) CleanupTimeout() time.Duration { return min(h.l.ttl, releaseTimeout) }
