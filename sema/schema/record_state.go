package schema

import "time"

// StateHeldAfter is Record.State of a key kept after its run ended (D13):
// bound to a lease nobody keeps alive, it frees when that lease expires or
// at the release of the node's held slots (D14).
const StateHeldAfter = "held-after"

// ViaFleetLock is Record.Via of a reboot slot granted by a FleetLock server (D19).
const ViaFleetLock = "fleetlock"

// decodeHeldAfter reads the fields a slot held after its run adds to the
// record (D13) with DecodeRecord's field reader, so a bad one is named in
// r.Bad like any other.
func decodeHeldAfter(r *ReadRecord, field func(string, any, func() bool) bool) {
	var ended, until time.Time
	field("state", &r.State, func() bool { return true })
	field("via", &r.Via, func() bool { return true })
	if field("ended", &ended, func() bool { return renderable(ended) }) {
		e := ended.UTC()
		r.Ended = &e
	}
	if field("held_until", &until, func() bool { return renderable(until) }) {
		u := until.UTC()
		r.HeldUntil = &u
	}
}

// IsHeldAfter reports whether the record says its slot is kept after the
// run ended (D13): state StateHeldAfter.
func (r Record) IsHeldAfter() bool { return r.State == StateHeldAfter }
