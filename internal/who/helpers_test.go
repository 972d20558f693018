package who

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
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
