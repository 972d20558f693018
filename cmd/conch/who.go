package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/sema"
)

// who lists the semaphore's keys (D6), or with no name every semaphore's: every capacity
// found under the name unless --max filters, with loud stderr lines when several
// capacities exist for a name, when one (name, max) mixes lease and node keys (D11), and
// when keys are not conch's. It returns nil if any holder, errEmpty if none (with a line
// that says so unless -q), errUnavailable if etcd does not answer, errUsage if it refuses
// the read, errWhoOutput if the listing cannot be printed (exitStatus maps them, D3); its
// lines go through c.rep.
func (c *semaCmd) who(j job) error {
	c.rep.bare = true // its lines name the semaphore their own way
	what := j.name
	if what == "" {
		what = "--who"
	}
	client, err := etcdconn.New(context.Background(), j.conn)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer client.Close()
	if j.who.watch {
		return c.watchWho(j, what, client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.conn.DialTimeout)
	defer cancel()
	l, err := sema.Snapshot(ctx, client, j.name)
	if errors.Is(err, sema.ErrRefused) { // permissions or credentials: retrying cannot help (D3)
		return endf(errUsage, "", "%s: %s refused the read: %v", what, j.conn.Where(), err)
	}
	if err != nil {
		return endf(errUnavailable, "", "%s: cannot read from %s: %v", what, j.conn.Where(), err)
	}
	sema.LeaseTTLs(ctx, client, l.Entries)
	all := l.Entries
	warnWho(c.rep.warnf, all)
	warnPauses(c.rep.warnf, l.Pauses)
	l = filterMax(l, j.max)
	entries := l.Entries
	if err := c.printWho(what, l, j.who); err != nil {
		return err
	}
	if slices.ContainsFunc(entries, func(e sema.Entry) bool { return e.Held }) {
		return nil
	}
	if j.who.quiet { // -q: the status alone says it, as for a timer's metrics
		return silent(errEmpty)
	}
	return endf(errEmpty, "", "%s", emptyMessage(j, entries, all)) // every form (D3): stderr, not stdout
}

// filterMax keeps, with max set (--max), the entries and pauses of that
// capacity; a foreign key, and a pause key that names no semaphore (Max 0),
// is in no capacity: it stays, flagged.
func filterMax(l sema.Listing, max int) sema.Listing {
	if max == 0 {
		return l
	}
	l.Entries = slices.DeleteFunc(slices.Clone(l.Entries), func(e sema.Entry) bool {
		return e.Info.Kind.Counted() && e.Max != max
	})
	l.Pauses = slices.DeleteFunc(slices.Clone(l.Pauses), func(p sema.Pause) bool { return p.Max != 0 && p.Max != max })
	return l
}

// renderWho renders the listing in the form v.format says, at time now: the
// text and JSON forms with the pauses (D16: a PAUSED line first, a
// "paused" object), the metrics with conch_sema_paused.
func renderWho(l sema.Listing, v whoValues, now time.Time) ([]byte, error) {
	switch v.format {
	case "json":
		return renderJSONPaused(l.Entries, l.Pauses)
	case "prometheus":
		return renderPrometheus(l, now)
	}
	return append(pauseBanner(l.Pauses), renderText(l.Entries)...), nil
}

// printWho writes the listing to stdout in the form v.format says, or with v.textfile to
// that file; on failure it returns the errWhoOutput that says why.
func (c *semaCmd) printWho(what string, l sema.Listing, v whoValues) error {
	out, err := renderWho(l, v, time.Now())
	if err != nil {
		return endf(errWhoOutput, "", "%s: cannot render the listing as %s: %v", what, v.format, err)
	}
	if v.textfile != "" {
		if err := writeFileAtomic(v.textfile, out); err != nil {
			return endf(errWhoOutput, "", "%s: cannot write the metrics file: %v", what, err)
		}
		return nil
	}
	if _, err := c.stdout.Write(out); err != nil {
		return endf(errWhoOutput, "", "%s: cannot write the listing: %v", what, err)
	}
	return nil
}

// emptyMessage says that nothing holds, and when --max asked for a capacity
// with no keys, names the capacities that have some: "no holders
// or waiters for only2[3]; keys exist for --max 2". shown are the entries
// listed (with no holder: foreign keys only), all those read.
func emptyMessage(j job, shown, all []sema.Entry) string {
	what := j.name
	switch {
	case j.name == "":
		what = "any semaphore"
	case j.max != 0:
		what = fmt.Sprintf("%s[%d]", j.name, j.max)
	}
	// a counted key at rank 0 always holds: what is left are foreign keys
	msg := "no holders or waiters for " + what
	if len(shown) > 0 {
		msg += fmt.Sprintf(" (%d foreign key(s), counted by no conch)", len(shown))
	}
	var caps []int
	for _, e := range all {
		if e.Info.Kind.Counted() && !slices.Contains(caps, e.Max) {
			caps = append(caps, e.Max)
		}
	}
	if j.max != 0 && j.name != "" && len(caps) > 0 {
		slices.Sort(caps)
		msg += "; keys exist for " + joinCaps(caps)
	}
	return msg
}

// warnWho gives warn (the reporter's warnf) the loud lines of D6 and D11
// (never on stdout, so --json stays one document): a name used with several
// capacities, a (name, max) mixing lease and node keys, and keys that are
// not conch's.
func warnWho(warn func(format string, args ...any), all []sema.Entry) {
	caps := map[string][]int{}
	kinds := map[capKey][2]int{} // lease keys, node keys
	odd := map[string]int{}
	var names []string
	for _, e := range all {
		if _, seen := caps[e.Name]; !seen {
			names = append(names, e.Name)
			caps[e.Name] = nil
		}
		switch {
		case e.NodeWait && e.Info.Kind.Counted(): // no key in the queue yet
		case e.Info.Kind == sema.KeyForeign:
			odd[e.Name]++
			continue // in no capacity's queue
		case e.Info.Kind == sema.KeyUnexpected:
			odd[e.Name]++
		default: // lease and node keys
			k := kinds[capKey{e.Name, e.Max}]
			k[boolIndex(e.Info.Kind == sema.KeySpread)]++
			kinds[capKey{e.Name, e.Max}] = k
		}
		if !slices.Contains(caps[e.Name], e.Max) {
			caps[e.Name] = append(caps[e.Name], e.Max)
		}
	}
	for _, n := range names {
		name := textField(n, nameWidth)
		if cs := caps[n]; len(cs) > 1 {
			warn("WARNING: %q is used with %d different capacities (%s): each --max is a separate semaphore, so nodes using different --max do not exclude each other",
				name, len(cs), joinCaps(cs))
		}
		for _, m := range caps[n] {
			if k := kinds[capKey{n, m}]; k[0] > 0 && k[1] > 0 {
				warn("WARNING: %s[%d] mixes %d lease keys and %d --spread node keys: processes with and without --spread share its slots, and --spread's one slot per node does not hold",
					name, m, k[0], k[1])
			}
		}
		if odd[n] > 0 {
			warn("WARNING: %d key(s) under %s are not conch's (flagged foreign or unexpected): unexpected ones take slots, foreign ones are counted by no conch",
				odd[n], textField(sema.NamePrefix(n), keyWidth))
		}
	}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func joinCaps(caps []int) string {
	var s []string
	for _, m := range caps {
		s = append(s, "--max "+strconv.Itoa(m))
	}
	return strings.Join(s, ", ")
}
