package sema

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

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

// ttlReaders bounds the TimeToLive requests LeaseTTLs has in flight: a
// listing of many semaphores has one holder lease per slot, read in
// parallel without flooding etcd.
const ttlReaders = 16

// LeaseTTLs reads the time to live of the lease of each holder in entries
// (Held, bound to a lease), one request per distinct lease, at most
// ttlReaders at a time, and sets their TTL. It is best effort: a lease it
// cannot read (etcd fails or refuses the request, ctx ends) leaves TTL
// unknown. It blocks until the reads are done or ctx ends; the goroutines
// it starts are joined before it returns.
func LeaseTTLs(ctx context.Context, c *clientv3.Client, entries []Entry) {
	var ids []int64
	ttls := map[int64]LeaseTTL{}
	for _, e := range entries {
		if _, seen := ttls[e.Lease]; e.Held && e.Lease != 0 && !seen {
			ids = append(ids, e.Lease)
			ttls[e.Lease] = LeaseTTL{}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, ttlReaders)
	for _, id := range ids {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			t := readTTL(ctx, c, id)
			mu.Lock()
			ttls[id] = t
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i := range entries {
		if e := &entries[i]; e.Held && e.Lease != 0 {
			e.TTL = ttls[e.Lease]
		}
	}
}

func readTTL(ctx context.Context, c *clientv3.Client, id int64) LeaseTTL {
	resp, err := c.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return LeaseTTL{}
	}
	return LeaseTTL{Known: true, Left: resp.TTL, Granted: resp.GrantedTTL}
}
