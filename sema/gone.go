package sema

import (
	"fmt"
	"time"
)

// goneErr is why the holder ends when its key is found deleted. A key goes with its lease,
// so when the lease's deadline on our own clock (the send time of the last confirmed
// keep-alive plus the granted TTL) has passed, etcd expired the lease and deleted the key
// with it: ErrLeaseLost, "expired", not an operator's deletion. That is what a holder sees
// after it was stalled past its TTL (frozen, stopped, starved) and resumes: its watch then
// delivers the DELETE of the expiry (D7d). Otherwise someone deleted the key: ErrKeyDeleted.
func (h *Holder) goneErr() error {
	if h.l.expiredAt(time.Now()) {
		return fmt.Errorf("%w: the lease expired (no keep-alive confirmed within its %v TTL: conch was stalled or cut off from etcd), and etcd deleted %s with it", ErrLeaseLost, h.l.ttl, h.key)
	}
	return fmt.Errorf("%w: %s", ErrKeyDeleted, h.key)
}

// expiredAt reports whether the lease's deadline (last confirmation + TTL) is at or before
// now, on the monotonic clock.
func (l *lease) expiredAt(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !now.Before(l.confirmed.Add(l.ttl))
}

// deadline is the lease's deadline on our own clock: the send time of the last confirmed
// keep-alive plus the granted TTL (etcd cannot expire the lease before it).
func (l *lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed.Add(l.ttl)
}
