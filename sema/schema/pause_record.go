// The pause key and its record (D16), as the layer that writes it (internal/fleet) and every
// reader decode it.

package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// PauseVersion is the format version written in every pause record.
const PauseVersion = 1

// PauseRoot is the prefix of every pause key, outside KeyRoot so no ranking
// read ever counts a pause as a slot claim (D16).
const PauseRoot = "/conch/v1/pause/"

// PauseKey is the pause key of the semaphore (name, max): while it exists no
// new holder starts (D16). It has no lease: it lasts until deleted (a resume).
func PauseKey(name string, max int) string {
	return PauseRoot + name + "/" + strconv.Itoa(max)
}

// Pause is a pause key as read back (D16): who set it (user@node), when,
// and why. It is hostile input (any client may write the key): when the
// value cannot be read, Err says why and Raw holds its first bytes; such a
// pause still counts (never a silent start).
type Pause struct {
	Name   string    `json:"-"` // the semaphore's name, from the key (its first segment, as stored)
	Max    int       `json:"-"` // its capacity, from the key; 0 when the key is no PauseKey (a bad name or capacity): it pauses nothing
	Key    string    `json:"-"`
	Rev    int64     `json:"-"` // create revision of the key
	V      int       `json:"v"`
	Who    string    `json:"who"`
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	Err    error     `json:"-"`
	Raw    string    `json:"-"` // with Err: the value's first 64 bytes
}

// String says who paused when and why, in one line ("?" for what is not
// known); the caller escapes it before printing (hostile input).
func (p Pause) String() string {
	if p.Err != nil {
		return fmt.Sprintf("an unreadable pause record (%v: %q)", p.Err, p.Raw)
	}
	s := fmt.Sprintf("paused by %s since %s", orUnknown(p.Who), timeOrQ(p.Since))
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func timeOrQ(t time.Time) string {
	if t.IsZero() || !renderable(t) {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}

// DecodePause reads the pause key kv as stored (hostile input, see Pause); it
// never fails: what it cannot read is in the result.
func DecodePause(kv *mvccpb.KeyValue) Pause {
	p := Pause{Key: string(kv.Key), Rev: kv.CreateRevision}
	seg, rest, _ := strings.Cut(strings.TrimPrefix(p.Key, PauseRoot), "/")
	p.Name = seg
	if max, canon := parseCapacitySegment(rest); canon && ValidateName(seg) == nil {
		p.Max = max // the key is PauseKey(seg, max): it pauses that semaphore
	}
	v := kv.Value
	var got Pause
	switch {
	case len(v) > maxRecordBytes:
		p.Err = fmt.Errorf("pause record of %d bytes, more than the %d read", len(v), maxRecordBytes)
	case json.Unmarshal(v, &got) != nil:
		p.Err = fmt.Errorf("pause record is not a JSON object")
	case got.Who == "" && got.Since.IsZero():
		p.Err = fmt.Errorf("pause record names neither who nor when")
	}
	if p.Err != nil {
		p.Raw = string(v[:min(len(v), 64)])
		return p
	}
	p.V, p.Who, p.Since, p.Reason = got.V, got.Who, got.Since.UTC(), got.Reason
	return p
}
