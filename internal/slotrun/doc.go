// Package slotrun runs a command in a slot of a sema semaphore: it waits for the slot, runs
// the child under unitrun's supervision while the slot is safely held, fences the child when
// the slot is lost, and decides how the holding ends. It is the one package that wires sema
// (the etcd recipe) to unitrun (the child's supervision); neither of them knows the other
// (D7: the child runs only while the slot is held; D7b: a late loss gets no stop grace).
//
// The package never logs and chooses no exit status: it reports what happens through the
// caller's hooks and returns a typed Outcome, which the caller words and maps to its exit.
package slotrun
