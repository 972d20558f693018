package who

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// transient: etcd's election and timeout errors are retried, a refusal, a
// context's end and other errors are not.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrGRPCLeaderChanged, true},
		{errors.Join(sema.ErrUnavailable, rpctypes.ErrLeaderChanged), true},
		{rpctypes.ErrPermissionDenied, false},
		{context.DeadlineExceeded, false},
		{errors.New("boom"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Read, and a Watch's first listing, against a 3-member cluster whose
// leadership is moved again and again while reads go on: every one answers. snapshot alone, beside it,
// is counted failing with etcd's election errors (logged: how often the
// elections hit a read depends on the machine).
func TestReadThroughElections(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	members := etcdtest.StartCluster(t, 3)
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcdtest.Endpoints(members), ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(t.Context(), schema.Prefix("el", 1)+"k", "{}"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var reads, readFails, rawFails atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if _, err := Read(ctx, c, "el"); err != nil {
					readFails.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				if _, err := snapshot(ctx, c, "el"); err != nil && transient(err) {
					rawFails.Add(1)
				}
				// a watch's first listing: Watch ends (ctx ended) once it is written
				if err := Watch(ctx, c, "el", WatchOptions{Out: cancelOnWrite(cancel)}); !errors.Is(err, context.Canceled) {
					readFails.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				cancel()
				reads.Add(1)
			}
		})
	}
	for i := range 10 {
		moveLeader(t, c, members, i)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads through 10 elections; snapshot alone failed %d times with an election error", reads.Load(), rawFails.Load())
	if n := readFails.Load(); n > 0 {
		t.Fatalf("%d of %d reads failed through the elections, first: %v", n, reads.Load(), firstErr.Load())
	}
}

// moveLeader moves the cluster's leadership from its leader to another
// member and waits until that member leads.
func moveLeader(t *testing.T, c *clientv3.Client, members []*etcdtest.Server, i int) {
	t.Helper()
	var leader uint64
	var leaderEp string
	ids := map[string]uint64{}
	for _, m := range members {
		st, err := c.Status(t.Context(), m.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Endpoint] = st.Header.MemberId
		if st.Leader == st.Header.MemberId {
			leader, leaderEp = st.Leader, m.Endpoint
		}
	}
	to := members[i%len(members)].Endpoint
	if to == leaderEp {
		to = members[(i+1)%len(members)].Endpoint
	}
	lc, err := clientv3.New(clientv3.Config{Endpoints: []string{leaderEp}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if leader == 0 {
		t.Fatal("no leader")
	}
	if _, err := lc.MoveLeader(t.Context(), ids[to]); err != nil {
		t.Fatalf("move leader to %s: %v", to, err)
	}
	polltest.Until(t, 30*time.Second, to+" to become leader", func() bool {
		st, err := c.Status(t.Context(), to)
		return err == nil && st.Leader == ids[to]
	})
}

// cancelOnWrite is an output that ends its watch at the first write.
type cancelOnWrite context.CancelFunc

func (f cancelOnWrite) Write(b []byte) (int, error) {
	f()
	return len(b), nil
}
