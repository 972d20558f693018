package who

import (
	"context"
	"sync"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ttlReaders bounds the TimeToLive requests leaseTTLs has in flight: a
// listing of many semaphores has one holder lease per slot, read in
// parallel without flooding etcd.
const ttlReaders = 16

// leaseTTLs reads the time to live of the lease of each holder in entries
// (Held, bound to a lease), one request per distinct lease, at most
// ttlReaders at a time, and sets their TTL. It is best effort: a lease it
// cannot read (etcd fails or refuses the request, ctx ends) leaves TTL
// unknown. It blocks until the reads are done or ctx ends; the goroutines
// it starts are joined before it returns.
func leaseTTLs(ctx context.Context, c *clientv3.Client, entries []Entry) {
	var ids []int64
	ttls := map[int64]schema.LeaseTTL{}
	for _, e := range entries {
		if _, seen := ttls[e.Lease]; e.Held && e.Lease != 0 && !seen {
			ids = append(ids, e.Lease)
			ttls[e.Lease] = schema.LeaseTTL{}
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

func readTTL(ctx context.Context, c *clientv3.Client, id int64) schema.LeaseTTL {
	resp, err := c.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return schema.LeaseTTL{}
	}
	return schema.LeaseTTL{Known: true, Left: resp.TTL, Granted: resp.GrantedTTL}
}
