package schema

// LeaseTTL is a lease's time to live as etcd reported it, in whole
// seconds.
type LeaseTTL struct {
	Known   bool  // the lease was read
	Left    int64 // seconds left; -1 when the lease no longer exists
	Granted int64 // the TTL it was granted
}

// Expiring reports whether a read lease is not being kept alive: it is
// gone, or less than half its granted TTL is left. A live conch renews its
// lease every TTL/6, at least once a second (D7), so a lease that low has
// missed keep-alives: its conch died, is stalled or is cut from etcd. A
// lease of 1 s cannot be told apart this way and never reads as expiring
// until it is gone.
func (t LeaseTTL) Expiring() bool {
	return t.Known && (t.Left < 0 || t.Granted > 1 && 2*t.Left < t.Granted)
}
