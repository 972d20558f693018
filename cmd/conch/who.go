package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// whoRecord is one element of `--who --json` (D6).
type whoRecord struct {
	Name      string     `json:"name"`
	Max       int        `json:"max"`
	State     string     `json:"state"` // HELD iff rank < max, derived, never stored
	Rank      int        `json:"rank"`
	Host      string     `json:"host"`
	PID       int        `json:"pid"`
	Since     time.Time  `json:"since"`
	HeldSince *time.Time `json:"held_since,omitempty"`
	Rev       int64      `json:"rev"`
	Lease     string     `json:"lease"` // hex, as etcdctl prints lease IDs
	Unit      string     `json:"unit"`  // "" when conch ran outside any unit
}

// who lists the semaphore's keys (D6): every capacity found under the name
// unless --max filters, with a loud stderr line when several capacities
// exist. Exit 0 if any holder, 1 if empty, 69 if etcd is unreachable (D3).
func (c *semaCmd) who(j job) int {
	client, err := newClient(j.conn)
	if err != nil {
		fmt.Fprintf(c.stderr, "conch: %s: %v\n", j.name, err)
		return clientStatus(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), j.conn.DialTimeout)
	defer cancel()
	all, err := sema.List(ctx, client, j.name)
	if errors.Is(err, sema.ErrRefused) { // permissions or credentials: retrying cannot help (D3)
		fmt.Fprintf(c.stderr, "conch: %s: etcd at %s refused the read: %v\n", j.name, strings.Join(j.conn.Endpoints, ","), err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "conch: %s: cannot reach etcd at %s: %v\n", j.name, strings.Join(j.conn.Endpoints, ","), err)
		return exitUnavailable
	}
	var caps []int
	for _, e := range all {
		if !slices.Contains(caps, e.Max) {
			caps = append(caps, e.Max)
		}
	}
	if len(caps) > 1 {
		fmt.Fprintf(c.stderr, "conch: WARNING: %q is used with %d different capacities (%s): each --max is a separate semaphore, so nodes using different --max do not exclude each other\n",
			j.name, len(caps), joinCaps(caps))
	}
	entries := all
	if j.max != 0 {
		entries = slices.DeleteFunc(slices.Clone(all), func(e sema.Entry) bool { return e.Max != j.max })
	}
	holders := map[int]int{}
	for _, e := range entries {
		if e.Held {
			holders[e.Max]++
		}
	}
	if c.JSON {
		recs := []whoRecord{}
		for _, e := range entries {
			recs = append(recs, toWhoRecord(e))
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(recs)
	} else {
		printWho(c, entries, holders)
	}
	if len(holders) == 0 {
		if !c.JSON && len(entries) == 0 {
			fmt.Fprintf(c.stderr, "conch: %s: no holders or waiters\n", j.name)
		}
		return exitEmpty
	}
	return exitOK
}

func toWhoRecord(e sema.Entry) whoRecord {
	state := "WAIT"
	if e.Held {
		state = "HELD"
	}
	return whoRecord{Name: e.Name, Max: e.Max, State: state, Rank: e.Rank, Host: e.Record.Host,
		PID: e.Record.PID, Since: e.Record.Since, HeldSince: e.Record.HeldSince, Rev: e.Rev,
		Lease: strconv.FormatInt(e.Lease, 16), Unit: recordUnit(e)}
}

// recordUnit is the unit D6 reports for a key: the child's scope when a holder runs it in one
// (its name follows from the semaphore and the revision, D8), else the unit conch itself runs
// in, if any (a waiter's child has no scope yet).
func recordUnit(e sema.Entry) string {
	if e.Record.Scope && e.Held {
		return unitrun.ScopeName(e.Name, e.Rev)
	}
	return e.Record.Unit
}

// printWho prints one line per key in revision order (04_sema.md "--who"):
//
//	video-encode[2/2] HELD  node2 pid=4242 since=2026-06-12T10:15:00Z rev=8812
func printWho(c *semaCmd, entries []sema.Entry, holders map[int]int) {
	hostW, pidW := 0, 0
	for _, e := range entries {
		hostW = max(hostW, len(e.Record.Host))
		pidW = max(pidW, len(strconv.Itoa(e.Record.PID)))
	}
	for _, e := range entries {
		r := toWhoRecord(e)
		since := r.Since
		if r.HeldSince != nil {
			since = *r.HeldSince
		}
		line := fmt.Sprintf("%s[%d/%d] %-4s  %-*s pid=%-*d since=%s rev=%d",
			e.Name, holders[e.Max], e.Max, r.State, hostW, r.Host, pidW, r.PID,
			since.UTC().Format(time.RFC3339), e.Rev)
		if r.Unit != "" {
			line += " unit=" + r.Unit
		}
		if e.RecordErr != nil {
			line += " (unreadable record)"
		}
		fmt.Fprintln(c.stdout, line)
	}
}

func joinCaps(caps []int) string {
	var s []string
	for _, m := range caps {
		s = append(s, "--max "+strconv.Itoa(m))
	}
	return strings.Join(s, ", ")
}
