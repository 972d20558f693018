package sema

import "time"

// waitKeepAlive is the keep-alive interval of a lease whose key waits behind
// the head of the queue, for a requested interval d (Options.WaitKeepAlive;
// 0 means the default) and the granted ttl. The benchmarks measured what the
// cadence costs etcd at 10,000 waiters (docs/benchmarks.md, scenario 5).
//
// It is never slower than TTL/3: a waiter then has two keep-alives in flight
// before the server can expire its lease, so one lost answer or a broken
// stream (re-dialled at the next tick) does not cost its place. A waiter
// whose lease does expire anyway is still correct, only later: it re-enters
// from step 1 with a new lease and key at the back of the queue (04_sema.md
// "Failure behavior"); safety never rests on a waiter's lease. It is never
// faster than the holding cadence, min(TTL/6, 1 s) (D7), which the head of
// the queue and holders use whatever d says.
//
// By default (d 0) it is TTL/6 (waitDefaultDivisor), so that a stall of a lone etcd member
// of up to 80 % of the TTL costs no waiter its place (D7h): such a member renews no lease
// while it is stopped and, at its thaw, expires every lease last renewed more than a TTL
// before, so a waiter's lease lives through a stall of S only if it was renewed less than
// TTL - S before the stall began. It costs etcd W*6/TTL keep-alives per second for W waiters
// (600/s per 1,000 waiters with the default TTL of 10 s, against 300/s at TTL/3).
func waitKeepAlive(d, ttl time.Duration) time.Duration {
	slow, fast := keepAliveInterval(ttl, false), keepAliveInterval(ttl, true)
	if d <= 0 {
		return max(fast, ttl/waitDefaultDivisor)
	}
	return max(fast, min(d, slow))
}

// waitDefaultDivisor makes the default waiting cadence TTL/6 (waitKeepAlive, D7h).
const waitDefaultDivisor = 6

// setWaitInterval sets the waiting cadence to waitKeepAlive(d, l.ttl),
// effective from the next keep-alive.
func (l *lease) setWaitInterval(d time.Duration) {
	l.mu.Lock()
	l.waitEvery = waitKeepAlive(d, l.ttl)
	l.mu.Unlock()
}
