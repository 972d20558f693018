package main

import (
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
