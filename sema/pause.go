// The pause gate (D16, D16b): the ranking Txn reads the pause key (schema.PauseKey), a
// waiter that would hold stays queued in its place while it exists, and the head follows it
// (pausewatch.go). The layer above (internal/fleet) writes and deletes the key.

package sema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pauseOp reads the semaphore's pause key in a ranking Txn (D16: in the
// same Txn as the ranking read, so a grant and a pause are ordered by
// etcd's revisions).
func (s *Semaphore) pauseOp() clientv3.Op { return clientv3.OpGet(schema.PauseKey(s.name, s.max)) }

// withPause applies the pause read by pauseOp, whose answer is resp's
// Responses[i], to r: r.pause is set when the key exists, and then a key
// that would hold does not (r.held false, r.paused true): it stays queued
// in its place (D16).
func withPause(r ranking, resp *clientv3.TxnResponse, i int) ranking {
	kvs := resp.Responses[i].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return r
	}
	p := schema.DecodePause(kvs[0])
	r.pause = &p
	if r.held {
		r.held, r.paused = false, true
	}
	return r
}

// pausedNow reads the pause key at once: a head of the queue promoted by a
// holder's DELETE (D1: no re-read) checks it before it holds (D16). It
// returns the pause, nil when there is none. Errors: an etcd error
// (errEtcd).
func (s *Semaphore) pausedNow(ctx context.Context) (*schema.Pause, error) {
	resp, err := s.c.Get(ctx, schema.PauseKey(s.name, s.max))
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read the pause of %s[max=%d]: %w", errEtcd, s.name, s.max, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	p := schema.DecodePause(resp.Kvs[0])
	return &p, nil
}

// pausedError is the cause wrapped in Acquire's ErrNoSlot with Nonblock when the
// semaphore is paused (D16); the *WaitError carries the pause (WaitError.Paused).
type pausedError struct{ Pause schema.Pause }

func (e *pausedError) Error() string { return "semaphore " + e.Pause.String() }

// noSlot is Acquire's error with Nonblock when ranking r did not hold:
// ErrNoSlot, wrapping a *pausedError when the semaphore is paused (D16).
// pauseTry bounds the head's pause read before a promotion (pauseCheck), and its
// confirmation on its watch stream (pauseFollow.clear, D16b): a
// healthy etcd answers in milliseconds, and a failed try costs only a
// re-read, which reads the pause too.
const pauseTry = 500 * time.Millisecond

func (s *Semaphore) noSlot(r ranking) error {
	if r.pause != nil {
		return fmt.Errorf("%w in %s[max=%d]: %w", ErrNoSlot, s.name, s.max, &pausedError{Pause: *r.pause})
	}
	return fmt.Errorf("%w in %s[max=%d]", ErrNoSlot, s.name, s.max)
}

// pauseCheck is the head's check before a promotion that no ranking read
// saw (t is turnPromoted): turnRerank when the semaphore is paused, or the
// read failed, so the re-read (which reads the pause) decides; else t.
// Only for a promotion the head's pause watch could not confirm (D16b: it
// came before the watches existed, or the ranking saw a pause). The
// read is bounded by pauseTry: one that went to a member that stopped
// answering fails fast, and the re-read goes to the next connection
// (D7b (3)) instead of waiting for gRPC to close the silent one.
func (s *Semaphore) pauseCheck(ctx context.Context, t turn) turn {
	rctx, cancel := context.WithTimeout(ctx, pauseTry)
	defer cancel()
	p, err := s.pausedNow(rctx)
	if err != nil || p != nil {
		return turnRerank
	}
	return t
}

// pauseOf is the pause err carries (a *pausedError), nil for none.
func pauseOf(err error) *schema.Pause {
	var pe *pausedError
	if errors.As(err, &pe) {
		return &pe.Pause
	}
	return nil
}
