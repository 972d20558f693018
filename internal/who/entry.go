package who

import (
	"sort"
	"strings"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Entry is one key of a semaphore as Read lists it (D6). Everything in it
// was read from etcd and is hostile input: callers escape it
// before printing.
type Entry struct {
	// Name is the semaphore's name; for a key under schema.KeyRoot whose name
	// segment is not a valid name (a listing of every semaphore), the raw
	// segment.
	Name string
	// Key is the key exactly as stored.
	Key string
	// Max is the capacity whose queue the key is in (Info.Max), 0 for a
	// foreign key.
	Max  int
	Info schema.KeyInfo // Kind, Suffix, NameLease as schema.ParseKey read them
	// Rank is the 0-based rank by create revision within (Name, Max), as
	// acquisition ranks it; -1 for keys no acquisition counts (foreign).
	Rank int
	// Held is derived from rank (Rank < Max), never from the stored value;
	// markPausedHeads clears it for a key held back by a pause (D16c).
	Held bool
	Rev  int64 // create revision: the holder's fencing token
	// Lease is the lease etcd says the key is bound to (KeyValue.Lease),
	// 0 for none: the real one, whatever the key's name spells.
	Lease  int64
	Record schema.ReadRecord
	// NodeWait marks a process with one slot per node waiting for its node's key (D11):
	// Key is its marker under schema.NodeWaitRoot, it has no rank (-1) and is
	// never Held. Info.Kind is schema.KeySpread for a marker whose key parses,
	// schema.KeyForeign for one that does not.
	NodeWait bool
	// TTL is the lease's time to live as leaseTTLs read it, for holders:
	// Known false when it was not read.
	TTL schema.LeaseTTL
	// HeldAfter marks a slot kept after its run ended (D13): its key was
	// rebound to a lease nobody keeps alive, and the slot frees when that
	// lease runs out or its slot is released (schema.Record.IsHeldAfter).
	HeldAfter bool
	// PausedHead marks a key that ranks below Max in a paused semaphore
	// but whose command has not started because of the pause (D16): it
	// waits, and Held is false. Set by markPausedHeads only.
	PausedHead bool
}

// Counted reports whether the entry takes a rank in its capacity's queue.
func (e Entry) Counted() bool { return e.Info.Kind.Counted() && !e.NodeWait }

// Flags name what is odd about the entry, for a listing to mark, in a
// fixed order: "foreign" (counted by no acquisition), "unexpected" (an
// unexpected suffix: counted), "no-lease" (the key is bound to no lease and
// never expires), "lease-mismatch" (the name spells another lease than
// etcd's), "expiring", "paused" (ranked to hold, held back by a pause:
// markPausedHeads), "unreadable" (the value did not decode), "newer-format",
// "missing:<field>", "bad:<field>". Empty for a sound key.
func (e Entry) Flags() []string {
	var f []string
	switch e.Info.Kind {
	case schema.KeyForeign:
		f = append(f, "foreign")
	case schema.KeyUnexpected:
		f = append(f, "unexpected")
	}
	if e.Lease == 0 {
		f = append(f, "no-lease")
	} else if e.Info.Kind == schema.KeyLease && e.Info.NameLease != e.Lease && !e.HeldAfter {
		// (a slot kept after its run is on a fresh lease by design, D13: its name keeps the run's)
		f = append(f, "lease-mismatch")
	}
	if e.TTL.Expiring() && !e.HeldAfter { // a held-after slot's lease runs out by design
		f = append(f, "expiring")
	}
	if e.PausedHead { // ranked to hold, held back by the pause (D16)
		f = append(f, "paused")
	}
	r := e.Record
	if r.Err != nil {
		return append(f, "unreadable")
	}
	if r.Newer {
		f = append(f, "newer-format")
	}
	for _, m := range r.Missing {
		f = append(f, "missing:"+m)
	}
	for _, b := range r.Bad {
		f = append(f, "bad:"+b)
	}
	return f
}

// groupAll classifies the keys read under schema.KeyRoot (kvs) and
// schema.NodeWaitRoot (waits), every one of them however odd, by schema.ParseKey:
// grouped by name in byte order; within a name, counted keys sorted by
// capacity then create revision, with rank and state derived per capacity as
// acquisition derives them (D6), each capacity's node waiters after them,
// then the foreign keys by create revision. A key whose name segment is not a
// valid name (or has no "/" after it) is foreign, with Name the raw segment.
// Values are decoded by schema.DecodeRecord.
func groupAll(kvs, waits []*mvccpb.KeyValue) []Entry {
	byName := map[string][]Entry{}
	for _, kv := range waits {
		e := newNodeWaitEntry(kv)
		byName[e.Name] = append(byName[e.Name], e)
	}
	for _, kv := range kvs {
		seg, _, slash := strings.Cut(strings.TrimPrefix(string(kv.Key), schema.KeyRoot), "/")
		e := newEntry(seg, kv)
		if !slash || schema.ValidateName(seg) != nil {
			e.Info = schema.KeyInfo{Kind: schema.KeyForeign, Suffix: strings.TrimPrefix(string(kv.Key), schema.KeyRoot)}
			e.Max = 0
		}
		byName[seg] = append(byName[seg], e)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Entry
	for _, n := range names {
		out = append(out, rankEntries(byName[n])...)
	}
	return out
}

// newNodeWaitEntry is the Entry of a marker read under schema.NodeWaitRoot.
func newNodeWaitEntry(kv *mvccpb.KeyValue) Entry {
	in := schema.ParseNodeWaitKey(string(kv.Key))
	info := schema.KeyInfo{Kind: schema.KeyForeign, Suffix: strings.TrimPrefix(string(kv.Key), schema.NodeWaitRoot)}
	if in.Sound {
		info = schema.KeyInfo{Kind: schema.KeySpread, Max: in.Max, Suffix: in.Node}
	}
	return Entry{Name: in.Name, Key: string(kv.Key), Max: info.Max, Info: info, Rank: -1,
		Rev: kv.CreateRevision, Lease: kv.Lease, Record: schema.DecodeRecord(kv.Value), NodeWait: true}
}

func newEntry(name string, kv *mvccpb.KeyValue) Entry {
	info := schema.ParseKey(name, string(kv.Key))
	rec := schema.DecodeRecord(kv.Value)
	return Entry{Name: name, Key: string(kv.Key), Max: info.Max, Info: info, Rank: -1,
		Rev: kv.CreateRevision, Lease: kv.Lease, Record: rec, HeldAfter: rec.IsHeldAfter()}
}

// rankEntries sorts one name's entries (counted by capacity then create
// revision, each capacity's node waiters after its queue, foreign ones
// last) and sets Rank and Held on the counted ones.
func rankEntries(es []Entry) []Entry {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Info.Kind.Counted() != b.Info.Kind.Counted() {
			return a.Info.Kind.Counted()
		}
		if a.Max != b.Max {
			return a.Max < b.Max
		}
		if a.NodeWait != b.NodeWait { // after the queue they will join
			return b.NodeWait
		}
		if a.Rev != b.Rev {
			return a.Rev < b.Rev
		}
		return a.Key < b.Key // keys created in one Txn share a revision
	})
	rank := map[int]int{}
	for i := range es {
		e := &es[i]
		if !e.Counted() {
			continue
		}
		e.Rank = rank[e.Max]
		e.Held = e.Rank < e.Max
		rank[e.Max]++
	}
	return es
}
