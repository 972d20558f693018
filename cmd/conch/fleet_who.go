package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/conch-project/conch/sema"
)

// whoHeldAfter is --who --json's "held_after" of a slot kept after its run
// (D13): the node that ran, when the run ended and when the hold's lease
// frees the slot at the latest (by the writer's clock). Fields the record
// lacks are null.
type whoHeldAfter struct {
	Node  *string `json:"node"`
	Ended *string `json:"ended"`      // RFC 3339, UTC
	Until *string `json:"held_until"` // RFC 3339, UTC
}

// heldAfterRecord is the "held_after" object of record r, nil unless r says
// its slot is kept after the run.
func heldAfterRecord(r sema.ReadRecord) *whoHeldAfter {
	if r.Err != nil || !r.IsHeldAfter() {
		return nil
	}
	w := &whoHeldAfter{}
	if !has(r.Missing, "host") && !has(r.Bad, "host") {
		w.Node = &r.Host
	}
	w.Ended = rfc3339(r.Ended)
	w.Until = rfc3339(r.HeldUntil)
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
// " held-after node=N ended=T until=U" ("" for none); fields escaped.
func heldAfterText(h *whoHeldAfter) string {
	if h == nil {
		return ""
	}
	return " held-after node=" + textField(deref(h.Node, "?"), hostWidth) +
		" ended=" + deref(h.Ended, "?") + " until=" + deref(h.Until, "?")
}

// whoPause is --who --json's "paused" object (D16): who paused the
// semaphore, when and why; with an unreadable pause record, "unreadable"
// says what was found, and the rest is null.
type whoPause struct {
	Who        *string `json:"who"`
	Since      *string `json:"since"` // RFC 3339, UTC
	Reason     string  `json:"reason"`
	Unreadable *string `json:"unreadable"`
}

func toWhoPause(p sema.Pause) *whoPause {
	w := &whoPause{Reason: p.Reason}
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

// renderJSONPaused is renderJSON with the pauses (D16): each record of a
// paused (name, max) carries "paused", and each pause is a record of its
// own, state PAUSED and kind "pause", so a pause of an empty semaphore
// shows too.
func renderJSONPaused(entries []sema.Entry, pauses []sema.Pause) ([]byte, error) {
	byCap := map[capKey]*whoPause{}
	recs := make([]whoRecord, 0, len(entries)+len(pauses))
	for _, p := range pauses {
		wp := toWhoPause(p)
		byCap[capKey{p.Name, p.Max}] = wp
		flags := []string{}
		if p.Err != nil {
			flags = append(flags, "unreadable")
		}
		recs = append(recs, whoRecord{Name: p.Name, Max: p.Max, State: "PAUSED", Rank: -1, Key: p.Key,
			Kind: "pause", Rev: p.Rev, Flags: flags, Paused: wp})
	}
	for _, e := range entries {
		r := toWhoRecord(e)
		r.Paused = byCap[capKey{e.Name, e.Max}]
		recs = append(recs, r)
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// pauseBanner is the text form's first lines (--who and --who --watch),
// one per pause key read (D16):
//
//	PAUSED heavy[2] paused by root@n1 since 2026-12-01T23:00:00Z: freeze
//
// A key that names no semaphore (sema.Pause.Max 0) shows as NAME[-] with
// its key, an unreadable record as such: garbage is shown, never skipped.
func pauseBanner(pauses []sema.Pause) []byte {
	var b []byte
	for _, p := range pauses {
		if p.Max == 0 {
			b = append(b, "PAUSED "+textField(p.Name, nameWidth)+"[-] "+pauseText(p)+" key="+textField(p.Key, keyWidth)+"\n"...)
			continue
		}
		b = append(b, "PAUSED "+textField(p.Name, nameWidth)+"["+strconv.Itoa(p.Max)+"] "+pauseText(p)+"\n"...)
	}
	return b
}

// warnPauses gives warn (the reporter's warnf) a loud line for each pause
// key read that is not as --pause writes it (D16): an unreadable record
// (it still pauses its semaphore), or a key that names no semaphore (it
// pauses nothing, and conch_sema_foreign_keys counts it).
func warnPauses(warn func(format string, args ...any), pauses []sema.Pause) {
	for _, p := range pauses {
		switch {
		case p.Max == 0:
			warn("WARNING: pause key %s names no semaphore (a bad name or capacity): it pauses nothing", textField(p.Key, keyWidth))
		case p.Err != nil:
			warn("WARNING: pause key %s holds an unreadable record (%s): %s[%d] stays paused until --resume deletes it",
				textField(p.Key, keyWidth), safeText(p.Err.Error()), textField(p.Name, nameWidth), p.Max)
		}
	}
}
