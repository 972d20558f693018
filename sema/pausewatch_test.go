package sema

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// followingHead returns a semaphore for a waiter that will be the head of the queue, and a
// channel that gets a value each time its pause watch covers every revision after its
// ranking read (D16b): from then on a promotion takes the path under test.
func followingHead(t *testing.T, c *clientv3.Client, name string, opts Options) (*Semaphore, <-chan struct{}) {
	t.Helper()
	armed := make(chan struct{}, 8)
	s := newSem(t, c, name, 1, opts)
	SetFollowArmed(s, func() {
		select {
		case armed <- struct{}{}:
		default:
		}
	})
	return s, armed
}

// await returns the next value of ch, failing the test after testTimeout.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("no %s within %v", what, testTimeout)
	}
	var zero T
	return zero
}

// ranges is how many Range requests the server has handled.
func ranges(t *testing.T, srv *etcdtest.Server) int {
	return int(srv.Scrape(t).Sum("grpc_server_handled_total", `grpc_method="Range"`))
}

// D16b: a hand-off to a head that follows the pause on its stream reads nothing: the server
// handles no Range from the release to the promoted waiter's Acquire (the pause read of D16
// as first done, the head's read before a promotion, cost one). The count is the server's,
// so a read of another mechanism that happens to fall in the window (a keep-alive's epoch
// check, D18, on a starved machine) shows too: of three hand-offs one must read nothing,
// which a hand-off path that reads every time never does.
func TestHeadFollowsPauseNoRead(t *testing.T) {
	t.Parallel()
	srv, c := startEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var counts []int
	for i := range 3 {
		name := fmt.Sprintf("pf%d", i)
		h1 := mustAcquire(t, newSem(t, c, name, 1, Options{}))
		s, armed := followingHead(t, c, name, Options{})
		got := acquireAsync(ctx, s)
		await(t, armed, "armed pause watch")
		before := ranges(t, srv)
		release(t, h1)
		r := await(t, got, "promotion")
		if r.err != nil {
			t.Fatalf("head after the release: %v", r.err)
		}
		n := ranges(t, srv) - before
		release(t, r.h)
		if n == 0 {
			return
		}
		counts = append(counts, n)
	}
	t.Fatalf("Range requests on each of three hand-offs: %v, want 0 on at least one", counts)
}

// D16 with D16b: a pause written while the head follows it stops the head's promotion, both
// when the pause comes in the very revision that deletes the holder's key (one Txn: the
// DELETE that would promote the head and the pause are one revision, so the pause holds) and
// when it comes just before an ordinary release. The head stays queued, paused, and takes
// the slot on resume.
func TestPauseStopsFollowingHead(t *testing.T) {
	t.Parallel()
	_, c := startEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	for i := range 6 {
		oneTxn := i%2 == 0
		name := fmt.Sprintf("ps%d", i)
		h1 := mustAcquire(t, newSem(t, c, name, 1, Options{}))
		log := &eventLog{}
		s, armed := followingHead(t, c, name, Options{OnEvent: log.add})
		got := acquireAsync(ctx, s)
		await(t, armed, "armed pause watch")
		if oneTxn {
			rec := `{"v":1,"who":"test@node","since":"2026-12-02T00:00:00Z","reason":"with the release"}`
			_, err := c.Txn(ctx).Then(clientv3.OpPut(schema.PauseKey(name, 1), rec), clientv3.OpDelete(h1.Key())).Commit()
			if err != nil {
				t.Fatal(err)
			}
		} else {
			if _, _, err := setPause(ctx, c, name, 1, "test@node", "before the release"); err != nil {
				t.Fatal(err)
			}
			release(t, h1)
		}
		if r, took := pausedOrHeld(t, log, got); took {
			t.Fatalf("run %d (one Txn %v): the head took the slot of a paused semaphore (%v)", i, oneTxn, r.err)
		}
		if _, had, err := resume(ctx, c, name, 1); err != nil || !had {
			t.Fatalf("Resume: %v %v", had, err)
		}
		r := await(t, got, "promotion after the resume")
		if r.err != nil {
			t.Fatalf("run %d: head after the resume: %v", i, r.err)
		}
		release(t, r.h)
		if oneTxn {
			_ = h1.Release(ctx) // its key was deleted: the slot was lost already
		}
	}
}

// pausedOrHeld polls until the head's log has a Waiting event with the pause (took false),
// or its Acquire returned (took true, with what it returned).
func pausedOrHeld(t *testing.T, log *eventLog, got <-chan acquired) (acquired, bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		select {
		case r := <-got:
			return r, true
		case <-time.After(5 * time.Millisecond):
		}
		log.mu.Lock()
		paused := slices.ContainsFunc(log.evs, pausedWaiting)
		log.mu.Unlock()
		if paused {
			return acquired{}, false
		}
	}
	t.Fatal("the head neither waited on the pause nor took the slot")
	return acquired{}, false
}
