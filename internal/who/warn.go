package who

import (
	"slices"

	"github.com/conch-project/conch/sema/schema"
)

// WarningKind says what is wrong in a listing that a person should be told
// loudly (D6, D11, D16), apart from the listing itself.
type WarningKind int

const (
	// SeveralCapacities: Name is used with each capacity of Caps, each a
	// separate semaphore whose holders do not exclude the others' (D6).
	SeveralCapacities WarningKind = iota + 1
	// MixedKeys: Name[Max] holds LeaseKeys lease keys and NodeKeys node
	// keys (D11): one slot per node does not hold.
	MixedKeys
	// NotConchs: Count keys under Name are not conch's (Entry.NotConchs,
	// D6g): foreign ones, counted by no acquisition; unexpected ones and ones
	// bound to no lease, which take slots. They are left out of MixedKeys.
	NotConchs
	// PauseNamesNothing: the pause key Pause.Key names no semaphore (a bad
	// name or capacity): it pauses nothing (D16a).
	PauseNamesNothing
	// PauseUnreadable: Pause's record cannot be read; its semaphore stays
	// paused until the key is deleted (D16).
	PauseUnreadable
)

// Warning is one thing wrong in a listing. Name and the pause's fields are
// as read from etcd (hostile: Escape them before showing them).
type Warning struct {
	Kind      WarningKind
	Name      string // the semaphore's name (a name segment as stored, for NotConchs)
	Max       int    // MixedKeys: the capacity
	Caps      []int  // SeveralCapacities: the capacities, in the listing's order
	LeaseKeys int    // MixedKeys
	NodeKeys  int    // MixedKeys
	Count     int    // NotConchs
	Pause     schema.Pause
}

// Warnings returns what is wrong in l: EntryWarnings then PauseWarnings.
func Warnings(l Listing) []Warning {
	return append(EntryWarnings(l.Entries), PauseWarnings(l.Pauses)...)
}

// EntryWarnings returns, per name in the order the entries first show it:
// SeveralCapacities, MixedKeys per capacity, then NotConchs.
func EntryWarnings(all []Entry) []Warning {
	caps := map[string][]int{}
	kinds := map[capKey][2]int{} // lease keys, node keys
	odd := map[string]int{}
	var names []string
	for _, e := range all {
		if _, seen := caps[e.Name]; !seen {
			names = append(names, e.Name)
			caps[e.Name] = nil
		}
		if e.NotConchs() {
			odd[e.Name]++
		}
		switch {
		case e.NodeWait && e.Info.Kind.Counted(): // no key in the queue yet
		case e.Info.Kind == schema.KeyForeign:
			continue // in no capacity's queue
		case e.NotConchs(): // unexpected, or bound to no lease: says nothing of how jobs run
		default: // conch's lease and node keys
			k := kinds[capKey{e.Name, e.Max}]
			if e.Info.Kind == schema.KeySpread {
				k[1]++
			} else {
				k[0]++
			}
			kinds[capKey{e.Name, e.Max}] = k
		}
		if !slices.Contains(caps[e.Name], e.Max) {
			caps[e.Name] = append(caps[e.Name], e.Max)
		}
	}
	var out []Warning
	for _, n := range names {
		if cs := caps[n]; len(cs) > 1 {
			out = append(out, Warning{Kind: SeveralCapacities, Name: n, Caps: cs})
		}
		for _, m := range caps[n] {
			if k := kinds[capKey{n, m}]; k[0] > 0 && k[1] > 0 {
				out = append(out, Warning{Kind: MixedKeys, Name: n, Max: m, LeaseKeys: k[0], NodeKeys: k[1]})
			}
		}
		if odd[n] > 0 {
			out = append(out, Warning{Kind: NotConchs, Name: n, Count: odd[n]})
		}
	}
	return out
}

// PauseWarnings returns one warning per pause key that is not as a pause
// is written (D16): PauseNamesNothing or PauseUnreadable.
func PauseWarnings(pauses []schema.Pause) []Warning {
	var out []Warning
	for _, p := range pauses {
		switch {
		case p.Max == 0:
			out = append(out, Warning{Kind: PauseNamesNothing, Name: p.Name, Pause: p})
		case p.Err != nil:
			out = append(out, Warning{Kind: PauseUnreadable, Name: p.Name, Max: p.Max, Pause: p})
		}
	}
	return out
}
