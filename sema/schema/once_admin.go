// The period markers (D15) as the listings read them.

package schema

import (
	"encoding/json"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Marker is a period marker as a listing reads it (D15): the semaphore its key names, the
// successful run it records, and its lease. It is hostile input (any client may write the
// key): when the value cannot be read, Err says why and Raw holds its first bytes; such a
// marker still closes the period until it goes.
type Marker struct {
	OnceRecord
	Name  string // the semaphore's name segment, as stored
	Max   int    // its capacity; 0 when the key names none (a bad capacity segment)
	Key   string
	Lease int64 // the marker's lease; 0: none (written by hand: it stays until deleted)
	// TTL is the marker's lease's time left, when read (a listing reads it best effort): the
	// period ends, and the next run may start, when it runs out
	TTL LeaseTTL
	Err error
	Raw string
}

// DecodeMarker reads the period marker kv, from under OnceRoot, by the rules of Marker. It
// does no I/O and never fails: garbage is kept, with Err.
func DecodeMarker(kv *mvccpb.KeyValue) Marker {
	m := Marker{Key: string(kv.Key), Lease: kv.Lease}
	rest := strings.TrimPrefix(m.Key, OnceRoot)
	name, seg, _ := strings.Cut(rest, "/")
	m.Name = name
	if max, ok := parseCapacitySegment(seg); ok && ValidateName(name) == nil {
		m.Max = max
	}
	if err := json.Unmarshal(kv.Value, &m.OnceRecord); err != nil || m.Node == "" || m.End.IsZero() {
		m.OnceRecord = OnceRecord{}
		m.Err = errors.New("not a marker record (JSON object with node and end)")
		m.Raw = string(kv.Value[:min(len(kv.Value), 64)])
	}
	return m
}
