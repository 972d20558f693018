package who

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/sematest"
)

// The recipe's test helpers, shared with the other layers' tests (sematest).
const testTimeout = sematest.Timeout

var (
	startEtcd   = sematest.StartEtcd
	newSem      = sematest.NewSem
	mustAcquire = sematest.MustAcquire
	release     = sematest.Release
	// acquireAsync starts Acquire on a goroutine; the result arrives on the channel.
	acquireAsync = sematest.AcquireAsync
)

// list is the entries of the semaphore name (every one when name is ""), as the one read
// behind every listing (snapshot) gives them.
func list(t *testing.T, c *clientv3.Client, name string) []Entry {
	t.Helper()
	l, err := snapshot(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Entries
}
