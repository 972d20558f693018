package slotrun

import (
	"time"

	"github.com/conch-project/conch/sema"
)

// MinTTL is the smallest lease TTL that leaves room to fence a child with a stop grace of
// killAfter (D7: fence at deadline - killAfter - 1 s, with two keep-alive intervals before
// it), computed rather than searched (a long grace must not spin). Keep-alives go every
// ttl/6, at most 1 s apart (sema): under 6 s that needs ttl - killAfter - 1 s >= ttl/3, from
// 6 s on ttl >= killAfter + 3 s.
func MinTTL(killAfter time.Duration) time.Duration {
	if small := sema.RoundTTL(killAfter + killAfter/2 + 1500*time.Millisecond); small < 6*time.Second {
		if sema.FenceTooLate(small, killAfter) { // ttl/6 rounds down
			small += time.Second
		}
		return small
	}
	return max(6*time.Second, sema.RoundTTL(killAfter+3*time.Second))
}

// MaxKillAfter is the longest stop grace, in whole 100 ms, that a lease of ttl can fence in
// time (sema.FenceTooLate is false; D7), or 0 when none can. FenceTooLate grows with the
// grace, so a bisection finds it in ~40 steps whatever ttl is.
func MaxKillAfter(ttl time.Duration) time.Duration {
	const step = 100 * time.Millisecond
	lo, hi := time.Duration(0), ttl/step // in steps; lo fits (or is 0), hi does not
	if sema.FenceTooLate(ttl, step) {
		return 0
	}
	lo = 1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if sema.FenceTooLate(ttl, mid*step) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo * step
}
