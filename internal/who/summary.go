package who

import (
	"sort"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// summary is one semaphore (name, max) at a Listing's revision, in the
// terms an operator alerts on. Every count is derived from the listing, as
// the listing derives states (D6): holders are keys ranked below max.
type summary struct {
	Name string
	Max  int
	// Holders counts the keys that hold a slot (rank < max), slots held
	// after a run (HeldAfter) included.
	Holders int
	// Waiters counts the keys ranked at max or later, and the one-slot-per-node
	// processes waiting for their own node's key (D11).
	Waiters int
	// HeldAfter counts the holders whose slot is kept after their run
	// ended (Entry.HeldAfter, D13).
	HeldAfter int
	// Expiring counts the holders whose lease is not being kept alive
	// (schema.LeaseTTL.Expiring; only when the caller read the TTLs), slots held
	// after a run left out: nobody keeps their lease alive by design (D13).
	Expiring int
	// Paused is set when the semaphore's pause key exists (schema.PauseKey),
	// whatever its record holds: an unreadable one still pauses (D16).
	Paused bool
	// OldestHolder is when the longest-running holder got its slot
	// (held_since, else since), OldestWaiter when the longest waiter
	// joined (since); zero when there is none, or no record says.
	OldestHolder time.Time
	OldestWaiter time.Time
}

// summarize returns one summary per (name, max) that has a counted key, a
// node waiter or a pause, sorted by name then max. Foreign keys, and pause
// keys whose name does not parse (schema.Pause.Max 0: they pause nothing, D16),
// are in no semaphore and are left out (foreignKeys counts them, and also the
// unexpected keys and those bound to no lease, which are counted here too).
// It does no I/O.
func summarize(l Listing) []summary {
	byKey := map[semKey]*summary{}
	get := func(name string, max int) *summary {
		k := semKey{name, max}
		if byKey[k] == nil {
			byKey[k] = &summary{Name: name, Max: max}
		}
		return byKey[k]
	}
	for _, e := range l.Entries {
		if !e.Info.Kind.Counted() { // foreign, or a node waiter whose key does not parse
			continue
		}
		s := get(e.Name, e.Max)
		if !e.Held {
			s.Waiters++
			s.OldestWaiter = older(s.OldestWaiter, e.Record.Since)
			continue
		}
		s.Holders++
		if e.HeldAfter {
			s.HeldAfter++
		}
		if e.TTL.Expiring() && !e.HeldAfter {
			s.Expiring++
		}
		since := e.Record.Since
		if e.Record.HeldSince != nil {
			since = *e.Record.HeldSince
		}
		s.OldestHolder = older(s.OldestHolder, since)
	}
	for _, p := range l.Pauses {
		if p.Max != 0 {
			get(p.Name, p.Max).Paused = true
		}
	}
	out := make([]summary, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Max < out[j].Max
	})
	return out
}

// foreignKeys counts, per name segment as stored, the keys of l that conch did
// not write (Entry.NotConchs, D6g): those in no semaphore (foreign keys,
// unparsable node-wait markers, pause keys that name none), the keys in a queue
// under a name conch never writes, and the keys and node-wait markers bound to
// no lease; the last two still take their rank in summarize. Each key is
// counted once.
func foreignKeys(l Listing) map[string]int {
	out := map[string]int{}
	for _, e := range l.Entries {
		if e.NotConchs() {
			out[e.Name]++
		}
	}
	for _, p := range l.Pauses {
		if p.Max == 0 {
			out[p.Name]++
		}
	}
	return out
}

// NotConchs reports whether conch did not write e (D6g): a key in no semaphore (foreign), a
// key in a queue under a name conch never writes (unexpected), or a key bound to no lease
// (conch binds every key it writes to one). foreignKeys counts such keys, and the listing's warning
// names them.
func (e Entry) NotConchs() bool {
	return !schema.ConchWrote(e.Info.Kind, e.Lease)
}

type semKey struct {
	name string
	max  int
}

// older is the earlier of a and b, a zero time meaning "none".
func older(a, b time.Time) time.Time {
	if b.IsZero() || !a.IsZero() && a.Before(b) {
		return a
	}
	return b
}
