package who

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// HeldAfter is a JSON record's "held_after": a slot kept after its run
// (D13): the node that ran, when the run ended and when the hold's lease
// frees the slot at the latest (by the writer's clock). Fields the record
// lacks are null.
type HeldAfter struct {
	Node  *string `json:"node"`
	Ended *string `json:"ended"`      // RFC 3339, UTC
	Until *string `json:"held_until"` // RFC 3339, UTC
	// Via names what granted a slot held after no run of conch's: "fleetlock" for a
	// reboot slot of a FleetLock server (D19); absent for a run's.
	Via string `json:"via,omitempty"`
}

// heldAfterRecord is the "held_after" object of record r, nil unless r says
// its slot is kept after the run.
func heldAfterRecord(r schema.ReadRecord) *HeldAfter {
	if r.Err != nil || !r.IsHeldAfter() {
		return nil
	}
	w := &HeldAfter{}
	if !has(r.Missing, "host") && !has(r.Bad, "host") {
		w.Node = &r.Host
	}
	w.Ended = rfc3339(r.Ended)
	w.Until = rfc3339(r.HeldUntil)
	w.Via = r.Via
	return w
}

func rfc3339(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// heldAfterText is the text form's words for a slot kept after its run,
// " held-after node=N ended=T until=U", with " via=V" before until= for a slot a lock
// server granted (D19) ("" for none); fields escaped.
func heldAfterText(h *HeldAfter) string {
	if h == nil {
		return ""
	}
	via := ""
	if h.Via != "" {
		via = " via=" + Escape(h.Via, hostWidth)
	}
	return " held-after node=" + Escape(deref(h.Node, "?"), hostWidth) +
		" ended=" + deref(h.Ended, "?") + via + " until=" + deref(h.Until, "?")
}

// Paused is a JSON record's "paused" object (D16): who paused the
// semaphore, when and why; with an unreadable pause record, "unreadable"
// says what was found, and the rest is null.
type Paused struct {
	Who        *string `json:"who"`
	Since      *string `json:"since"` // RFC 3339, UTC
	Reason     string  `json:"reason"`
	Unreadable *string `json:"unreadable"`
}

func toPaused(p schema.Pause) *Paused {
	w := &Paused{Reason: p.Reason}
	if p.Err != nil {
		s := fmt.Sprintf("%v: %q", p.Err, p.Raw)
		w.Unreadable = &s
		return w
	}
	w.Who = &p.Who
	if !p.Since.IsZero() {
		s := p.Since.UTC().Format(time.RFC3339)
		w.Since = &s
	}
	return w
}

// renderJSON returns the listing as one JSON document: an array, "[]" when
// empty, ending in a newline. Each record of a paused (name, max) carries
// "paused", and each pause is a record of its own, state PAUSED and kind
// "pause", so a pause of an empty semaphore shows too (D16). unit names
// holders' scopes (recordScope). Its error (none is expected: Record holds
// only strings, numbers and booleans; encoding/json escapes control
// characters and replaces invalid UTF-8) is for the caller to fail loudly
// on, rather than print nothing.
func renderJSON(entries []Entry, pauses []schema.Pause, once []schema.Marker, unit UnitFunc) ([]byte, error) {
	byCap := map[capKey]*Paused{}
	recs := make([]Record, 0, len(entries)+len(pauses))
	for _, p := range pauses {
		wp := toPaused(p)
		byCap[capKey{p.Name, p.Max}] = wp
		flags := []string{}
		if p.Err != nil {
			flags = append(flags, "unreadable")
		}
		recs = append(recs, Record{Name: p.Name, Max: p.Max, State: "PAUSED", Rank: -1, Key: p.Key,
			Kind: "pause", Rev: p.Rev, Flags: flags, Paused: wp})
	}
	for _, m := range once {
		recs = append(recs, onceRecord(m))
	}
	for _, e := range entries {
		r := toRecord(e, unit)
		r.Paused = byCap[capKey{e.Name, e.Max}]
		recs = append(recs, r)
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("encoder produced invalid JSON")
	}
	return append(b, '\n'), nil
}

// pauseBanner is the text form's first lines (one-shot and watched), one
// per pause key read (D16):
//
//	PAUSED heavy[max=2] paused by root@n1 since 2026-12-01T23:00:00Z: freeze
//
// A key that names no semaphore (schema.Pause.Max 0) shows as NAME[-] with
// its key, an unreadable record as such: garbage is shown, never skipped.
func pauseBanner(pauses []schema.Pause) []byte {
	var b []byte
	for _, p := range pauses {
		if p.Max == 0 {
			b = append(b, "PAUSED "+Escape(p.Name, NameWidth)+"[-] "+PauseText(p)+" key="+Escape(p.Key, KeyWidth)+"\n"...)
			continue
		}
		b = append(b, "PAUSED "+Escape(p.Name, NameWidth)+"[max="+strconv.Itoa(p.Max)+"] "+PauseText(p)+"\n"...)
	}
	return b
}

// PauseText is "paused by root@n1 since 2026-...Z: reason" for a line,
// with what etcd held made safe to print (hostile input: SafeText); a
// pause whose record cannot be read says what was found.
func PauseText(p schema.Pause) string {
	if p.Err != nil {
		return "paused by an unreadable pause record (" + SafeText(p.Err.Error()) + ": " + strconv.QuoteToASCII(p.Raw) + ")"
	}
	q := p
	q.Who, q.Reason = SafeText(p.Who), SafeText(p.Reason)
	return q.String()
}

// SafeText is s for a line: unchanged when it is printable ASCII of at most
// 200 bytes, else quoted (escapes: no terminal control, no bidi control)
// and cut to 64 bytes.
func SafeText(s string) string {
	ok := len(s) <= 200
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= 0x20 && s[i] < 0x7f
	}
	if ok {
		return s
	}
	if q := strconv.QuoteToASCII(s); len(q) <= 64 {
		return q
	}
	return strconv.QuoteToASCII(s)[:60] + `..."`
}
