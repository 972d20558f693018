package sema

import (
	"context"
	"time"
)

// giveUpKey holds, in the context given to the give-up steps, when their
// shared budget ends (markGiveUp).
type giveUpKey struct{}

// markGiveUp starts the give-up budget once ctx (the caller's wait) has
// ended: every later step (revoking our leases, the probe that tells a time-out from an outage) is
// bounded by what is left of giveUpTimeout from now (giveUpWithin), so
// a wait of D returns within D + 1 s even while etcd hangs (three bounded
// steps in a row would make a 3 s wait last 6 s). It returns ctx
// itself while ctx has not ended, or once marked.
func markGiveUp(ctx context.Context) context.Context {
	if ctx.Err() == nil || ctx.Value(giveUpKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, giveUpKey{}, time.Now().Add(giveUpTimeout))
}

// giveUpWithin bounds one give-up step by d and by what is left of the budget
// markGiveUp started in ctx (0 when spent: the step's request fails at once,
// ErrUnavailable). Without a mark, d.
func giveUpWithin(ctx context.Context, d time.Duration) time.Duration {
	if end, ok := ctx.Value(giveUpKey{}).(time.Time); ok {
		return max(0, min(d, time.Until(end)))
	}
	return d
}
