package who

import (
	"context"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// markPausedHeads finds the keys of l that rank below their capacity in a
// paused semaphore but whose command never started because of the pause
// (D16: such a key stays queued in its place), and marks them: Held false,
// PausedHead true. It changes l.Entries in place and returns nothing.
//
// A key of a paused (name, max) that ranks below max, is not a slot kept
// after its run, and was never rewritten as promoted (no held_since, D1):
//   - created after the pause key: its enqueue read the pause, so it
//     waits (certain, no request);
//   - created before it: it holds if its enqueue held at once (ranked
//     below max, no pause, at its create revision), which one read at that
//     revision tells (one Txn per such key, at most max per semaphore); if
//     it did not, it was a waiter promoted under the pause, so it waits. A
//     revision etcd compacted away, or a read that fails, leaves the key
//     as ranked (Held): best effort, never a holder hidden by a guess.
//
// It blocks until its reads are done or ctx ends.
func markPausedHeads(ctx context.Context, c *clientv3.Client, l Listing) {
	paused := map[semKey]int64{} // pause key's create revision
	for _, p := range l.Pauses {
		if p.Max != 0 {
			paused[semKey{p.Name, p.Max}] = p.Rev
		}
	}
	if len(paused) == 0 {
		return
	}
	for i := range l.Entries {
		e := &l.Entries[i]
		pauseRev, ok := paused[semKey{e.Name, e.Max}]
		if !ok || !e.Held || e.HeldAfter || !e.Counted() || e.Record.Err == nil && e.Record.HeldSince != nil {
			continue
		}
		if e.Rev > pauseRev || !heldAtEnqueue(ctx, c, *e) {
			e.Held, e.PausedHead = false, true
		}
	}
}

// heldAtEnqueue reports whether e's key held at once when it was created:
// fewer than e.Max keys under its prefix and no pause key at its create
// revision. It answers true when it cannot tell (compacted, failed).
func heldAtEnqueue(ctx context.Context, c *clientv3.Client, e Entry) bool {
	at := clientv3.WithRev(e.Rev)
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(schema.Prefix(e.Name, e.Max), clientv3.WithPrefix(), clientv3.WithCountOnly(), at),
		clientv3.OpGet(schema.PauseKey(e.Name, e.Max), clientv3.WithCountOnly(), at),
	).Commit()
	if err != nil {
		return true
	}
	ahead := resp.Responses[0].GetResponseRange().Count - 1 // our key is counted
	paused := resp.Responses[1].GetResponseRange().Count > 0
	return ahead < int64(e.Max) && !paused
}
