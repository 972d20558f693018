package sema

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
)

// enqueueAgain follows an enqueue whose answer was lost (err wraps errEtcd and
// is no refusal): the Txn may have committed, and our key's name was known
// before the write, so it reads that key first (D7j). If the key is there on
// our lease l, it is ours: adoptKey ranks it at its create revision and the
// place is kept. If it is not there, the Txn did not commit and the enqueue
// is written again (the same put-if-absent, safe to repeat); a key found by
// that write is read again, since the lost Txn may have committed after the
// read (etcd had it in flight), and adopted if it is on our lease. Each try is
// bounded by readTimeout (the read) or ctx (the write); etcd errors are
// retried from retryMin to retryMax while ctx and l live. It returns the
// create revision of our key and its ranking, or: errKeyExists when a key
// of another lease holds the name (with Spread, this node's), the lease's
// error (ErrLeaseLost, ErrFenced), a refusal, or the last etcd error when ctx
// ends.
func (s *Semaphore) enqueueAgain(ctx context.Context, l *lease, key, value string) (myRev int64, r ranking, err error) {
	var refused error
	err = retryEtcd(ctx, l, func() error {
		var e error
		myRev, r, e = s.enqueueRead(ctx, l, key, value)
		if etcderr.Refused(e) { // final: retryEtcd must not see errEtcd in it
			refused = e
			return nil
		}
		return e
	})
	if refused != nil {
		return 0, r, refused
	}
	return myRev, r, err
}

// enqueueRead is one try of enqueueAgain: read our key, adopt it or enqueue.
func (s *Semaphore) enqueueRead(ctx context.Context, l *lease, key, value string) (int64, ranking, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	resp, err := s.c.Get(rctx, key)
	cancel()
	if err != nil {
		return 0, ranking{}, fmt.Errorf("%w: cannot read %s after its enqueue's answer was lost: %w", errEtcd, key, err)
	}
	if len(resp.Kvs) == 0 { // the lost Txn did not commit, or not yet
		s.seams.readBackEmpty(key)
		myRev, r, err := s.enqueue(ctx, key, l, value)
		if errors.Is(err, errKeyExists) { // written since the read: the lost Txn, if on our lease
			return 0, r, fmt.Errorf("%w: %s was written after it was read: reading it again: %w", errEtcd, key, err)
		}
		return myRev, r, err
	}
	kv := resp.Kvs[0]
	if clientv3.LeaseID(kv.Lease) != l.id { // not ours: the first try's own answer would have said so
		return 0, ranking{rev: resp.Header.Revision}, fmt.Errorf("%w: %s", errKeyExists, key)
	}
	return s.adoptKey(ctx, key, kv.CreateRevision)
}

// adoptKey ranks our key written at myRev by a Txn whose answer was lost, as
// the enqueue would have (D2): rerank, and for a key behind the head the
// exact rank from a count of the keys created up to myRev. Errors as rerank's.
func (s *Semaphore) adoptKey(ctx context.Context, key string, myRev int64) (int64, ranking, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	r, err := s.rerank(rctx, key, myRev)
	if err != nil {
		return 0, r, err
	}
	if r.rank < 0 {
		resp, err := s.whileOurs(rctx, key, myRev, clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithMaxCreateRev(myRev)))
		if err != nil {
			return 0, r, err
		}
		r.rank = int(resp.Responses[0].GetResponseRange().Count - 1)
	}
	return myRev, r, nil
}

// answerLost reports whether err, an enqueue's, may hide a Txn that committed:
// an etcd error that is no refusal (a transport error or a time-out).
func answerLost(err error) bool {
	return err != nil && errors.Is(err, errEtcd) && !etcderr.Refused(err)
}
