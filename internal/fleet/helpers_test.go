package fleet

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema/schema"
)

// heldKV reads key: its value decoded, create revision and lease; ok false when it is gone.
func heldKV(t *testing.T, c *clientv3.Client, key string) (r schema.ReadRecord, rev, lease int64, ok bool) {
	t.Helper()
	resp, err := c.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return r, 0, 0, false
	}
	kv := resp.Kvs[0]
	return schema.DecodeRecord(kv.Value), kv.CreateRevision, kv.Lease, true
}
