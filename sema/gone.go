package sema

import (
	"errors"
	"fmt"
	"time"
)

// goneErr is why the holder ends when its key is found deleted. A key goes with its lease,
// so when the lease's deadline on our own clock (the send time of the last confirmed
// keep-alive plus the granted TTL) has passed, etcd expired the lease and deleted the key
// with it: ErrLeaseLost, "expired", not an operator's deletion. That is what a holder sees
// after it was stalled past its TTL (frozen, stopped, starved) and resumes: its watch then
// delivers the DELETE of the expiry (D7d). Otherwise someone deleted the key: ErrKeyDeleted.
func (h *Holder) goneErr() error { return h.l.goneErr(h.key) }

// goneErr is why key, bound to l, is gone: ErrLeaseLost when l's deadline has passed (etcd
// expired l and deleted key with it, D7d), or when etcd answered again only after leaving
// the keep-alives unanswered for the TTL or more (a stopped etcd expires such a lease at its
// thaw, though it answered a keep-alive sent during the stall: D7h), else ErrKeyDeleted. A waiter's key is judged so
// too: a waiter stopped past its lease lost its place to the expiry, not to an operator.
func (l *lease) goneErr(key string) error {
	expired, outlived := l.expiredAt(time.Now()), l.outlivedTTL()
	silent := outlived // etcd answered again after a silence past the TTL, and expired the lease
	if expired {
		silent = l.etcdSilent()
	}
	if silent > 0 { // D7h: conch sent on time, etcd did not answer
		return fmt.Errorf("%w: the lease expired (etcd stopped answering: none of the keep-alives conch sent for %v was answered within its %v TTL; a stopped or frozen etcd expires such leases when it resumes), and etcd deleted %s with it", ErrLeaseLost, silent.Round(time.Second), l.ttl, key)
	}
	if expired {
		return fmt.Errorf("%w: the lease expired (no keep-alive confirmed within its %v TTL: conch was stalled or cut off from etcd), and etcd deleted %s with it", ErrLeaseLost, l.ttl, key)
	}
	return fmt.Errorf("%w: %s", ErrKeyDeleted, key)
}

// outlivedTTL is how long etcd left the keep-alives unanswered before its last answer, when
// that was the TTL or more while conch sent on time (lease.outlived), else 0.
func (l *lease) outlivedTTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outlived
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

// lostPlace is err, why a waiter's key bound to l is no longer in the queue, with the loss
// judged as goneErr does when it is the key's deletion or the lease's loss (D7d): past l's
// deadline, or after a silence of etcd past the TTL, the lease's expiry, said as such.
func (l *lease) lostPlace(key string, err error) error {
	if errors.Is(err, ErrKeyDeleted) || errors.Is(err, ErrLeaseLost) && (l.expiredAt(time.Now()) || l.outlivedTTL() > 0) {
		return l.goneErr(key)
	}
	return err
}

// sendSlack is how late a keep-alive may be sent, past its interval, before conch counts as
// stalled itself (etcdSilent): a loaded machine's scheduling, not a stop.
const sendSlack = time.Second

// etcdSilent is how long conch has sent keep-alives that etcd left unanswered, when it sent
// them on time all along since the last confirmed one (no gap between two sends longer than
// the interval plus sendSlack, and the last sent within that): etcd stopped answering, not
// conch (D7h). It is 0 when conch itself was late (stopped, frozen, starved) or sent nothing.
func (l *lease) etcdSilent() time.Duration {
	iv := l.interval()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastSend.IsZero() || l.sendGap > iv+sendSlack || time.Since(l.lastSend) > iv+sendSlack {
		return 0
	}
	return time.Since(l.confirmed)
}

// noteSend records that a keep-alive is sent now: the longest gap between two sends since
// the last confirmation, for etcdSilent.
func (l *lease) noteSend() {
	now := time.Now()
	l.mu.Lock()
	if !l.lastSend.IsZero() {
		l.sendGap = max(l.sendGap, now.Sub(l.lastSend))
	}
	l.lastSend = now
	l.mu.Unlock()
}
