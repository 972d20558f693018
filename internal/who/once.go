package who

import (
	"context"
	"strconv"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Once is a period marker of --once-per in --who --json (D15): the successful run that
// closed the period (node, fencing token, start and end, RFC 3339 UTC) and when the next run
// may start (the marker's lease runs out; null when it was not read, or the marker has no
// lease: written by hand, it stays until deleted). Unreadable is set, with the rest null,
// when the marker's value cannot be read (hostile input); it still closes the period.
type Once struct {
	Node       *string `json:"node"`
	Rev        int64   `json:"rev"`
	Start      *string `json:"start"`
	End        *string `json:"end"`
	NextAt     *string `json:"next_at"`
	Unreadable *string `json:"unreadable,omitempty"`
}

// onceRecord is the JSON record of the period marker m: state ONCE, kind "once".
func onceRecord(m schema.Marker) Record {
	o := &Once{Rev: m.Rev, NextAt: rfc3339(nextAt(m, time.Now()))}
	if m.Err != nil {
		why := m.Err.Error() + ": " + strconv.QuoteToASCII(m.Raw)
		o.Unreadable = &why
	} else {
		o.Node, o.Start, o.End = &m.Node, rfc3339(&m.Start), rfc3339(&m.End)
	}
	flags := []string{}
	if m.Err != nil {
		flags = append(flags, "unreadable")
	}
	if m.Lease == 0 {
		flags = append(flags, "no-lease")
	}
	return Record{Name: m.Name, Max: m.Max, State: "ONCE", Rank: -1, Key: m.Key, Kind: "once", Rev: m.Rev,
		Flags: flags, Once: o}
}

// nextAt is when the period of m ends: the run's end plus the lease's granted TTL (the
// marker's lease is granted, for one period, as the run ends), which stays the same from
// one read to the next; for a marker whose record cannot be read, now plus the time its
// lease has left. nil when unknown (not read, no lease).
func nextAt(m schema.Marker, now time.Time) *time.Time {
	if !m.TTL.Known || m.TTL.Left < 0 {
		return nil
	}
	t := now.Add(time.Duration(m.TTL.Left) * time.Second)
	if m.Err == nil && m.TTL.Granted > 0 {
		t = m.End.Add(time.Duration(m.TTL.Granted) * time.Second)
	}
	t = t.UTC().Truncate(time.Second)
	return &t
}

// onceBanner is the text form's line per period marker (D15), after the PAUSED lines:
//
//	ONCE ha-job[max=1] ran on node2 rev=8812 2026-12-01T10:00:03Z..2026-12-01T10:00:41Z next=2026-12-01T10:50:03Z
//
// Node names come from etcd and are escaped; an unreadable marker says what was found.
func onceBanner(once []schema.Marker, now time.Time) []byte {
	var b []byte
	for _, m := range once {
		line := "ONCE " + Escape(m.Name, NameWidth) + "[max=" + strconv.Itoa(m.Max) + "] "
		if m.Max == 0 {
			line = "ONCE " + Escape(m.Name, NameWidth) + "[-] key=" + Escape(m.Key, KeyWidth) + " "
		}
		if m.Err != nil {
			line += "an unreadable period marker (" + SafeText(m.Err.Error()) + ": " + strconv.QuoteToASCII(m.Raw) + ")"
		} else {
			line += "ran on " + SafeText(m.Node) + " rev=" + strconv.FormatInt(m.Rev, 10) + " " +
				m.Start.UTC().Format(time.RFC3339) + ".." + m.End.UTC().Format(time.RFC3339)
		}
		switch next := nextAt(m, now); {
		case m.Lease == 0:
			line += " next=never (no lease: stays until --reset-period)"
		case next != nil:
			line += " next=" + next.Format(time.RFC3339)
		}
		b = append(b, line+"\n"...)
	}
	return b
}

// markerTTLs reads the time left of each marker's lease (the end of its period), best effort
// as leaseTTLs; it blocks until the reads are done or ctx ends.
func markerTTLs(ctx context.Context, c *clientv3.Client, once []schema.Marker) {
	for i := range once {
		if once[i].Lease != 0 {
			once[i].TTL = readTTL(ctx, c, once[i].Lease)
		}
	}
}
