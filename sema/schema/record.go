package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// RecordVersion is the format version written in every Record. A reader
// takes any version: fields it does not know are ignored, fields it needs
// and cannot find are reported missing, and a version above its own is
// flagged (ReadRecord.Newer), never refused.
const RecordVersion = 1

// maxRecordBytes bounds the value a reader decodes: conch's own records are
// about 150 bytes, etcd lets a client store 1.5 MiB. A larger value is not
// decoded (ReadRecord.Err says so); its key is listed all the same.
const maxRecordBytes = 64 << 10

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
	// State is StateHeldAfter once the run ended and the slot is kept
	// after it (D13); "" while a run is queued or supervised.
	State string `json:"state,omitempty"`
	// Ended is when the run ended, for a slot held after it (D13), UTC.
	Ended *time.Time `json:"ended,omitempty"`
	// HeldUntil is when a slot held after its run frees at the latest:
	// Ended plus the hold's granted TTL, by the writer's clock (D13). The
	// lease, not this field, frees the slot: it is for people to read.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// Via names what granted a slot held after no run of conch's: ViaFleetLock for a
	// reboot slot a lock server took on a node's behalf (D19); "" for a run.
	Via string `json:"via,omitempty"`
}

// Encode is r as stored under a holder's key: its JSON, as every writer of a slot writes it.
func (r Record) Encode() string {
	b, err := json.Marshal(r)
	if err != nil { // cannot happen: only plain fields
		panic(err)
	}
	return string(b)
}

// ReadRecord is a value read back from etcd: hostile input, since
// any client with write access to /conch/v1/ may have put it, or an older
// or newer conch. Only the fields that decoded are set in Record.
type ReadRecord struct {
	Record
	// Err is set when nothing could be decoded: the value is not a JSON
	// object, or is larger than maxRecordBytes. Record is then zero.
	Err error
	// Missing names the fields every version writes (v, host, pid, since)
	// that are absent: a listing shows them as unknown.
	Missing []string
	// Bad names the fields present with a value of the wrong type or out
	// of range (a pid <= 0, a time that is not RFC 3339 or outside years
	// 0..9999, a version < 1): shown as unknown too.
	Bad []string
	// Newer is set when Version > RecordVersion: written by a newer conch,
	// whose fields may mean more than this one knows.
	Newer bool
}

// requiredFields are written by every version of the record.
var requiredFields = []string{"v", "host", "pid", "since"}

// DecodeRecord reads a stored value field by field, so one bad field does
// not hide the others, and never fails: what it could not read is in the
// result's Err, Missing and Bad. Unknown fields are ignored; duplicate keys
// take the last value (encoding/json's rule).
func DecodeRecord(b []byte) ReadRecord {
	if len(b) > maxRecordBytes {
		return ReadRecord{Err: fmt.Errorf("record of %d bytes, more than the %d read", len(b), maxRecordBytes)}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		if err == nil {
			err = fmt.Errorf("record is JSON null, not an object")
		}
		return ReadRecord{Err: fmt.Errorf("not a JSON object: %w", err)}
	}
	var r ReadRecord
	for _, f := range requiredFields {
		if _, ok := fields[f]; !ok {
			r.Missing = append(r.Missing, f)
		}
	}
	// field decodes fields[name] into dst and reports whether it is there
	// and valid; a present field that is not is named in r.Bad. JSON null
	// is absence for the optional fields, a bad value for the others.
	field := func(name string, dst any, valid func() bool) bool {
		raw, ok := fields[name]
		null := bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
		if !ok || null && optionalFields[name] {
			return false
		}
		if null || json.Unmarshal(raw, dst) != nil || !valid() {
			r.Bad = append(r.Bad, name)
			return false
		}
		return true
	}
	var v, pid int
	var since, held time.Time
	if field("v", &v, func() bool { return v >= 1 }) {
		r.Version = v
	}
	field("host", &r.Host, func() bool { return true })
	if field("pid", &pid, func() bool { return pid > 0 && pid <= maxPID }) {
		r.PID = pid
	}
	if field("since", &since, func() bool { return renderable(since) }) {
		r.Since = since.UTC()
	}
	if field("held_since", &held, func() bool { return renderable(held) }) {
		h := held.UTC()
		r.HeldSince = &h
	}
	field("unit", &r.Unit, func() bool { return true })
	field("scope", &r.Scope, func() bool { return true })
	decodeHeldAfter(&r, field)
	r.Newer = r.Version > RecordVersion
	return r
}

// optionalFields may be absent or null: conch omits them when empty.
var optionalFields = map[string]bool{"held_since": true, "unit": true, "scope": true,
	"state": true, "ended": true, "held_until": true, "via": true}

// maxPID is the largest PID accepted: Linux's PID_MAX_LIMIT is 2^22, other
// systems stay below 2^31.
const maxPID = 1<<31 - 1

// renderable reports whether t, in UTC, is a time RFC 3339 can spell (years
// 0..9999): anything else cannot be re-encoded (time.MarshalJSON fails),
// which must not make a JSON listing fail or print nothing.
func renderable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}
