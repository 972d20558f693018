package sema

import (
	"encoding/json"
	"time"
)

// RecordVersion is the format version written in every Record.
const RecordVersion = 1

// Record is the JSON value stored under a holder's key (D6). It never holds
// the command line or environment, which may carry secrets.
type Record struct {
	Version int    `json:"v"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	// Since is when the key was written (enqueue time), UTC.
	Since time.Time `json:"since"`
	// HeldSince is set when a waiter is promoted and rewrites its key (D1).
	// A process that held a slot at once never rewrites its key (D2: three
	// requests in all), so for it HeldSince is absent and equals Since.
	HeldSince *time.Time `json:"held_since,omitempty"`
	// Unit is the systemd unit conch itself runs in, if any.
	Unit string `json:"unit,omitempty"`
	// Scope is true when the child runs in a transient scope, whose name
	// derives from the semaphore name and revision (D8).
	Scope bool `json:"scope,omitempty"`
}

func (r Record) encode() string {
	b, err := json.Marshal(r)
	if err != nil { // cannot happen: only plain fields
		panic(err)
	}
	return string(b)
}

func decodeRecord(b []byte) (Record, error) {
	var r Record
	err := json.Unmarshal(b, &r)
	return r, err
}
