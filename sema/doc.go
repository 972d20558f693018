// Package sema implements conch's counting semaphore on etcd: at most N
// holders cluster-wide for a (name, capacity) pair (04_sema.md, "The recipe",
// with the fixed wake-up rule of DECISIONS.md D1 and the one-round-trip
// enqueue of D2).
//
// Keys are /conch/v1/sema/<name>/<max>/<leaseID>, bound to the holder's
// lease and ranked by create revision. The create revision of a holder's key
// is its fencing token. The package knows nothing about processes: it hands
// out a *Holder whose Context ends when the slot is lost (D7), and the caller
// stops its work when that happens.
//
// Use, as in Example: New(client, name, max, Options{...}) names the
// semaphore on a clientv3.Client the caller keeps; Acquire(ctx) waits for a
// slot while ctx allows and returns a *Holder, or a *WaitError saying whether
// etcd answered (no slot, none of our keys left) or not; Holder.Bind(ctx) gives the
// context to run the work under, ended with the holder's own error as its
// cause when the slot is lost; Holder.Release gives the slot back. Options.OnEvent
// reports the queue's transitions (Enqueued, Waiting with the number ahead,
// Held, Reentering) for logs and status lines: the package itself never logs.
//
// It owns the key schema (keys.go, keyparse.go, nodewait.go, once.go) and the decoding of
// what any reader finds under it (DecodeRecord, DecodePause, DecodeMarker), so that
// acquisition and every reader agree on each key. Two hooks carry the layers above: the
// pause gate that the ranking Txn reads and the head follows (pause.go, pausewatch.go, D16,
// D16b: while the pause key exists no new holder starts), and Holder.HoldAfter, which
// rebinds a holder's key to a lease nobody keeps alive so the slot stays taken after the run
// (D13); a write a layer makes while holding is bounded by Holder.UntilDeadline (hooks.go).
// The fleet rules that use them (run rules, period markers, pauses' administration, the
// release of held slots, reboot slots, the child's check of its slot) are internal/fleet's;
// the listings are internal/who's. sema imports none of the layers above it.
package sema
