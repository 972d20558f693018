package who

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conch-project/conch/sema/schema"
)

// Everything a listing shows was read from etcd, where any client with
// write access to /conch/v1/ may have put it: hostile input. The text form
// escapes it and bounds its width; the JSON form is exact, and always one
// valid document (renderJSON cannot produce an invalid one).

// Text field widths, in bytes after escaping; longer fields end in "...".
const (
	hostWidth = 64  // a host name is at most 64 bytes (HOST_NAME_MAX)
	unitWidth = 256 // systemd's unit name limit
	// KeyWidth fits a semaphore name (128) and its prefix, capacity and a node name (128).
	KeyWidth = 300
	// NameWidth is a semaphore name's (D4); only a listing of every
	// semaphore can meet a longer raw name segment.
	NameWidth = 128
)

// Record is one element of the JSON listing (D6): every key under the
// prefix, with its real key, the lease etcd binds it to, and flags. Fields
// the stored record lacks or spells wrongly are null.
type Record struct {
	Name      string   `json:"name"`
	Max       int      `json:"max"`   // 0 for a foreign key (no capacity's queue)
	State     string   `json:"state"` // HELD iff rank < max, derived, never stored; FOREIGN: counted by nobody
	Rank      int      `json:"rank"`  // -1 for a foreign key
	Key       string   `json:"key"`
	Kind      string   `json:"kind"`   // lease, spread, unexpected, foreign (schema.KeyKind)
	Spread    bool     `json:"spread"` // a node key conch wrote: one slot per node (D11); false for a key bound to no lease (D6g)
	Host      *string  `json:"host"`
	PID       *int     `json:"pid"`
	Since     *string  `json:"since"`      // RFC 3339, UTC
	HeldSince *string  `json:"held_since"` // HELD: when it got the slot; null while waiting
	Rev       int64    `json:"rev"`
	Lease     *string  `json:"lease"` // etcd's lease of the key, schema.FormatLeaseID; null: none
	Unit      string   `json:"unit"`  // the unit conch runs in (its service); "" when outside any unit
	Scope     string   `json:"scope"` // a holder's command's transient scope; "" when it has none
	Version   *int     `json:"record_version"`
	Flags     []string `json:"flags"` // Entry.Flags; [] for a sound key
	// TTL is a holder's lease's time to live in seconds (-1: the lease is
	// gone), GrantedTTL its granted TTL; null for waiters and when unread.
	TTL        *int64 `json:"ttl"`
	GrantedTTL *int64 `json:"granted_ttl"`
	// Expiring: the holder's lease is not being kept alive (its conch died,
	// is stalled or cut off): the slot frees when the lease runs out.
	Expiring bool `json:"expiring"`
	// WaitsFor is, for a one-slot-per-node process waiting for its own node's key
	// (D11), that key; null otherwise. Such a process has no rank yet.
	WaitsFor *string `json:"waits_for"`
	// HeldAfter: the slot is kept after its run (D13); null otherwise (pause.go)
	HeldAfter *HeldAfter `json:"held_after"`
	// Paused: the semaphore (name, max) is paused (D16); null otherwise (pause.go)
	Paused *Paused `json:"paused"`
	// Once: a record of kind "once", state ONCE, is the period marker of --once-per (D15):
	// the run that closed this period; null on other records (once.go)
	Once *Once `json:"once,omitempty"`
}

// state is HELD, WAIT or FOREIGN (a key no acquisition counts).
func state(e Entry) string {
	switch {
	case e.NodeWait && e.Info.Kind.Counted():
		return "WAIT"
	case !e.Counted():
		return "FOREIGN"
	case e.Held:
		return "HELD"
	}
	return "WAIT"
}

// toRecord is e as a JSON record; unit names a holder's scope (recordScope).
func toRecord(e Entry, unit UnitFunc) Record {
	r := e.Record
	w := Record{Name: e.Name, Max: e.Max, State: state(e), Rank: e.Rank, Key: e.Key,
		Kind: e.Info.Kind.String(), Spread: e.Info.Kind == schema.KeySpread && !e.NotConchs(), Rev: e.Rev,
		Unit: e.Record.Unit, Scope: recordScope(e, unit), Flags: e.Flags()}
	if w.Flags == nil {
		w.Flags = []string{}
	}
	if t := e.TTL; t.Known {
		w.TTL, w.GrantedTTL, w.Expiring = &t.Left, &t.Granted, t.Expiring() && !e.HeldAfter
	}
	if e.NodeWait && w.State == "WAIT" {
		k := schema.NodeKey(schema.Prefix(e.Name, e.Max), e.Info.Suffix)
		w.WaitsFor = &k
	}
	if e.Lease != 0 {
		l := schema.FormatLeaseID(e.Lease)
		w.Lease = &l
	}
	if r.Err != nil {
		return w
	}
	known := func(f string) bool { return !has(r.Missing, f) && !has(r.Bad, f) }
	if known("host") {
		w.Host = &r.Host
	}
	if known("pid") {
		w.PID = &r.PID
	}
	if known("since") {
		s := r.Since.UTC().Format(time.RFC3339)
		w.Since = &s
	}
	if r.HeldSince != nil {
		s := r.HeldSince.UTC().Format(time.RFC3339)
		w.HeldSince = &s
	} else if w.State == "HELD" {
		// a holder that had its slot at enqueue never rewrites its key: it holds since it
		// joined (schema.Record.HeldSince), so the field is there for every holder
		w.HeldSince = w.Since
	}
	if known("v") {
		w.Version = &r.Version
	}
	w.HeldAfter = heldAfterRecord(r)
	return w
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// UnitFunc names the transient unit of a holder whose record says its
// command runs in one, from the semaphore's name and the key's create
// revision (the unit's name follows from them, D8).
type UnitFunc func(name string, rev int64) string

// recordScope is the transient scope a holder runs its command in (D6, D8), named by unit;
// "" when it has none: a waiter (its command has no scope yet), a holder running its command
// directly, unit nil, or a foreign key, whose name may not be a semaphore name. The unit that
// runs conch itself (the record's Unit, a service) is reported beside it, as unit=.
func recordScope(e Entry, unit UnitFunc) string {
	if unit != nil && e.Record.Scope && e.Held && schema.ValidateName(e.Name) == nil {
		return unit(e.Name, e.Rev)
	}
	return ""
}

// capKey keys the text form's holders=n/max: holders per (name, max).
type capKey struct {
	name string
	max  int
}

// renderText returns one line per entry in revision order (04_sema.md
// "who"), each ending in "\n" and holding no control character:
//
//	video-encode[max=2] HELD  node2 pid=4242 since=2026-06-12T10:15:00Z rev=8812 lease=694d7a1b2c3d4e5f holders=2/2
//
// The semaphore is named as name[max=N] wherever a line names one;
// holders=n/N counts its holders (D6c). Then come, for a holder ttl=LEFT/GRANTED (its lease's time to live, "gone"
// once expired), unit= (the unit conch runs in) and scope= (its command's) when known, waits-for= for a one-slot-per-node process
// waiting for its node's key, else key= when the key is not a plain lease
// key, and flags= (Entry.Flags, "expiring" among them) when anything
// is odd. Unknown fields print "?".
// A foreign key's bracket is [-], with no count: it is in no capacity's
// queue.
func renderText(entries []Entry, unit UnitFunc) []byte {
	holders := map[capKey]int{}
	hostW, pidW := 1, 1
	var rows []Record
	for _, e := range entries {
		if e.Held {
			holders[capKey{e.Name, e.Max}]++
		}
		r := toRecord(e, unit)
		rows = append(rows, r)
		hostW = max(hostW, len(Escape(deref(r.Host, "?"), hostWidth)))
		pidW = max(pidW, len(pidText(r.PID)))
	}
	var b bytes.Buffer
	for i, e := range entries {
		r := rows[i]
		bracket, count := "[-]", ""
		if e.Info.Kind.Counted() {
			bracket, count = "[max="+strconv.Itoa(e.Max)+"]", fmt.Sprintf(" holders=%d/%d", holders[capKey{e.Name, e.Max}], e.Max)
		}
		since := deref(r.Since, "?")
		if r.HeldSince != nil {
			since = *r.HeldSince
		}
		fmt.Fprintf(&b, "%s%s %-4s  %-*s pid=%-*s since=%s rev=%d lease=%s%s",
			Escape(e.Name, NameWidth), bracket, r.State, hostW, Escape(deref(r.Host, "?"), hostWidth),
			pidW, pidText(r.PID), since, e.Rev, deref(r.Lease, "none"), count)
		if r.TTL != nil {
			fmt.Fprintf(&b, " ttl=%s/%ds", ttlText(*r.TTL), *r.GrantedTTL)
		}
		if r.Unit != "" {
			b.WriteString(" unit=" + Escape(r.Unit, unitWidth))
		}
		if r.Scope != "" {
			b.WriteString(" scope=" + Escape(r.Scope, unitWidth))
		}
		if r.WaitsFor != nil {
			b.WriteString(" waits-for=" + Escape(*r.WaitsFor, KeyWidth))
		} else if e.Info.Kind != schema.KeyLease {
			b.WriteString(" key=" + Escape(e.Key, KeyWidth))
		}
		b.WriteString(heldAfterText(r.HeldAfter))
		if len(r.Flags) > 0 {
			b.WriteString(" flags=" + strings.Join(r.Flags, ","))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ttlText is a lease's seconds left, "gone" for an expired lease.
func ttlText(left int64) string {
	if left < 0 {
		return "gone"
	}
	return strconv.FormatInt(left, 10) + "s"
}

func deref(s *string, unknown string) string {
	if s == nil {
		return unknown
	}
	return *s
}

func pidText(p *int) string {
	if p == nil {
		return "?"
	}
	return strconv.Itoa(*p)
}

// Escape escapes s for one field of a text line: bytes 0x21..0x7e stay
// (backslash too, so a unit name's own \x2d escapes stay copyable); other
// ASCII, space included (a field stays one word), and invalid UTF-8 bytes
// become \xNN; other runes \uXXXX or \UXXXXXXXX. So the result is printable
// ASCII: no terminal escape, no newline, no bidi control. It is cut at
// width bytes, never inside an escape, with "..." added.
func Escape(s string, width int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size <= 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r > 0x20 && r < 0x7f:
			piece = string(r)
		case r < 0x80:
			piece = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff:
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = fmt.Sprintf(`\U%08x`, r)
		}
		if b.Len()+len(piece) > width {
			b.WriteString("...")
			break
		}
		b.WriteString(piece)
		i += size
	}
	if b.Len() == 0 {
		return `""`
	}
	return b.String()
}
