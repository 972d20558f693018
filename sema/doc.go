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
package sema
