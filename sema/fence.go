// Fencing math: keep-alive cadence and when a held lease counts as
// unconfirmable (D7), pure functions of the TTL and the margin.

package sema

import "time"

// Keep-alive cadence (D7). Deep in the queue a late keep-alive only costs
// our place, so the stock TTL/3 is enough. At the head of the queue and while
// holding, conch keeps the lease on its own clock: a keep-alive every TTL/6,
// at least once a second, so it learns early that the lease can no longer be
// proven alive, and a promoted waiter starts with a fresh confirmation.
const (
	waitKeepAliveDivisor = 3
	holdKeepAliveDivisor = 6
	maxHoldKeepAlive     = time.Second
)

func keepAliveInterval(ttl time.Duration, fast bool) time.Duration {
	if !fast {
		return ttl / waitKeepAliveDivisor
	}
	return min(ttl/holdKeepAliveDivisor, maxHoldKeepAlive)
}

// fenceDelay is how long after a confirmed keep-alive's send time the lease
// counts as unconfirmable. When the margin leaves less than two keep-alive
// intervals, conch fences at the first failed keep-alive (D7).
func fenceDelay(ttl, margin time.Duration) time.Duration {
	if margin <= 0 { // waiting: the lease counts until its TTL
		return ttl
	}
	d := ttl - margin
	if iv := keepAliveInterval(ttl, true); d < 2*iv {
		d = 2 * iv
	}
	return d
}

// FenceTooLate reports whether a stop grace of killAfter is too long for a
// lease of ttl to be fenced before it expires (D7: conch then warns at start
// and fences at the first failed keep-alive). ttl is rounded up to seconds.
func FenceTooLate(ttl, killAfter time.Duration) bool {
	ttl = RoundTTL(ttl)
	return ttl-killAfter-time.Second < 2*keepAliveInterval(ttl, true)
}

// RoundTTL returns ttl rounded up to whole seconds, as etcd grants leases
// (D4); the server may still raise it to its minimum.
func RoundTTL(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1).Truncate(time.Second)
}
