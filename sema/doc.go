// Package sema implements conch's counting semaphore on etcd: at most N holders cluster-wide
// for a (name, capacity) pair (04_sema.md, "The recipe", with the wake-up rule of
// DECISIONS.md D1 and the one-round-trip enqueue of D2).
//
// Keys are /conch/v1/sema/<name>/<max>/<leaseID>, bound to the holder's lease and ranked by
// create revision, which is the holder's fencing token. The package knows no process:
// New(client, name, max, Options{...}) names the semaphore; Acquire(ctx) waits for a slot and
// returns a *Holder, or a *WaitError saying whether etcd answered; Holder.Bind(ctx) gives the
// context to run the work under, ended with the holder's error as its cause when the slot is
// lost (D7); Holder.Release gives the slot back. Options.OnEvent reports the queue's
// transitions: the package never logs.
//
// The key schema and the records, with the decoding every reader needs, are the leaf
// package sema/schema, which the recipe writes through and the layers read with. Two hooks
// carry the layers above: the pause gate the ranking Txn reads and the head follows
// (pause.go, D16, D16b), and Holder.HoldAfter, the lease rebind that keeps a slot after the
// run (D13); Holder.UntilDeadline bounds a layer's write while holding. The fleet rules are
// internal/fleet's, the listings internal/who's; sema imports neither. docs/design.md
// ("Where things live") gives the order in which to read the recipe's five steps.
package sema
