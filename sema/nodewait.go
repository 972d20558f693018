package sema

import (
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// nodeWaitOps are the ops the enqueue Txn (D2) adds for a Spread
// waiter: when our node's key is there (the Txn's else branch) and we are
// to wait for it, the marker is put bound to our lease; when our key is
// written (the then branch), the marker is deleted. No request is added:
// both ride in the enqueue's one Txn. Without Spread both are empty.
func (s *Semaphore) nodeWaitOps(l *lease, value string) (then, els []clientv3.Op) {
	if !s.opts.Spread {
		return nil, nil
	}
	k := schema.NodeWaitKey(s.name, s.max, s.opts.Node, l.id)
	then = []clientv3.Op{clientv3.OpDelete(k)}
	if !s.opts.Nonblock {
		els = []clientv3.Op{clientv3.OpPut(k, value, clientv3.WithLease(l.id))}
	}
	return then, els
}
