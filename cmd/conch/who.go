package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// who lists the semaphore's keys (D6), or with no name every semaphore's, through package
// who: every capacity found under the name unless --max filters, with loud stderr lines
// (whoWarning) for what is wrong in the listing. It returns nil if any holder, errEmpty if
// none (with a line that says so unless -q), errUnavailable if etcd does not answer,
// errUsage if it refuses the read, errWhoOutput if the listing cannot be printed
// (exitStatus maps them, D3); its lines go through c.rep.
func (c *semaCmd) who(j job) error {
	c.rep.bare = true // its lines name the semaphore their own way
	what := cmp.Or(j.name, "--who")
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
	l, err := who.Read(ctx, client, j.name)
	if err != nil {
		return c.readFailed(j, what, err)
	}
	all := l.Entries
	for _, w := range who.Warnings(l) {
		c.whoWarning(w)
	}
	l = who.Filter(l, j.max)
	if err := c.printWho(what, l, j.who); errors.Is(err, syscall.EPIPE) {
		// the reader went away (`--who | head -3`): it has what it wanted; quiet, with the
		// listing's own status, as --watch ends quietly when its reader goes
		if who.Held(l.Entries) {
			return nil
		}
		return silent(errEmpty)
	} else if err != nil {
		return err
	}
	if who.Held(l.Entries) {
		return nil
	}
	if j.who.quiet { // -q: the status alone says it, as for a timer's metrics
		return silent(errEmpty)
	}
	msg := emptyMessage(j, l.Entries, all)
	if j.name != "" && len(all) == 0 {
		msg += hintNote(ctx, client, j.name) // a typo: "no such semaphore: did you mean X?"
	}
	return endf(errEmpty, "", "%s", msg) // every form (D3): stderr, not stdout
}

// readFailed is the end of a first read that failed: errUsage when etcd refused it
// (permissions or credentials: retrying cannot help, D3), else errUnavailable.
func (c *semaCmd) readFailed(j job, what string, err error) error {
	if errors.Is(err, sema.ErrRefused) {
		return endf(errUsage, "", "%s: %s refused the read: %v", what, j.conn.Where(), err)
	}
	return endf(errUnavailable, "", "%s: cannot read from %s: %v", what, j.conn.Where(), err)
}

// whoOptions are package who's options for the form v.format says; holders' scopes are
// named as systemd.ScopeName names them (D8).
func whoOptions(v whoValues) who.Options {
	return who.Options{Format: who.Format(v.format), Unit: systemd.ScopeName}
}

// printWho writes the listing to stdout in the form v.format says, or with v.textfile to
// that file; on failure it returns the errWhoOutput that says why, or the write's error
// wrapping syscall.EPIPE when stdout's reader went away.
func (c *semaCmd) printWho(what string, l who.Listing, v whoValues) error {
	out, err := who.Render(l, whoOptions(v), time.Now())
	if err != nil {
		return endf(errWhoOutput, "", "%s: cannot render the listing as %s: %v", what, v.format, err)
	}
	if v.textfile != "" {
		if err := who.WriteFile(v.textfile, out); err != nil {
			return endf(errWhoOutput, "", "%s: cannot write the metrics file: %v", what, err)
		}
		return nil
	}
	if _, err := c.stdout.Write(out); errors.Is(err, syscall.EPIPE) {
		return err
	} else if err != nil {
		return endf(errWhoOutput, "", "%s: cannot write the listing: %v", what, err)
	}
	return nil
}

// watchWho is `--who --watch` (who.Watch): it ends only by a signal (SIGINT, SIGTERM,
// SIGHUP: conch dies of it, D3), when stdout's reader goes away (status 0), or when stdout
// cannot be written (errWhoOutput). A first read that fails is errUnavailable, or errUsage
// when etcd refuses it (exitStatus maps them).
func (c *semaCmd) watchWho(j job, what string, client *clientv3.Client) error {
	ctx, stopSignals := signalContext()
	defer stopSignals()
	err := who.Watch(ctx, client, j.name, who.WatchOptions{Options: whoOptions(j.who), Max: j.max,
		Out: c.stdout, Warn: c.whoWarning, Note: c.watchNote(j), ReadTimeout: j.conn.DialTimeout})
	var sig errSignal
	switch {
	case errors.As(context.Cause(ctx), &sig):
		return signalExit(sig.sig, "", "")
	case errors.Is(err, who.ErrOutputClosed):
		return nil
	case errors.Is(err, sema.ErrRefused), errors.Is(err, sema.ErrUnavailable):
		return c.readFailed(j, what, err)
	}
	return endf(errWhoOutput, "", "%s: %v", what, err)
}

// watchNote says on stderr what the watch met and is handling.
func (c *semaCmd) watchNote(j job) func(who.Note) {
	return func(n who.Note) {
		switch n.Kind {
		case who.NoteCompacted:
			c.rep.warnf("--who --watch: etcd compacted its history past our watch (revision %d): read again, watching on", n.Rev)
		case who.NoteLost:
			c.rep.warnf("--who --watch: lost %s (%v): retrying", j.conn.Where(), n.Err)
		case who.NoteResumed:
			c.rep.warnf("--who --watch: etcd answers again: read again, watching on")
		}
	}
}

// whoWarning says w loudly on stderr (never on stdout, so --json stays one document): a
// name used with several capacities (D6), a (name, max) mixing lease and node keys (D11),
// keys that are not conch's, a pause key that is not as --pause writes it (D16).
func (c *semaCmd) whoWarning(w who.Warning) {
	name, key := who.Escape(w.Name, who.NameWidth), who.Escape(w.Pause.Key, who.KeyWidth)
	switch w.Kind {
	case who.SeveralCapacities:
		c.rep.warnf("WARNING: %q is used with %d different capacities (%s): each --max is a separate semaphore, so nodes using different --max do not exclude each other",
			name, len(w.Caps), joinCaps(w.Caps))
	case who.MixedKeys:
		c.rep.warnf("WARNING: %s[max=%d] mixes %d lease keys and %d --spread node keys: processes with and without --spread share its slots, and --spread's one slot per node does not hold",
			name, w.Max, w.LeaseKeys, w.NodeKeys)
	case who.NotConchs:
		c.rep.warnf("WARNING: %d key(s) under %s are not conch's (flagged foreign, unexpected or no-lease): unexpected and no-lease ones take slots (a no-lease one until it is deleted by hand), foreign ones are counted by no conch",
			w.Count, who.Escape(schema.NamePrefix(w.Name), who.KeyWidth))
	case who.PauseNamesNothing:
		c.rep.warnf("WARNING: pause key %s names no semaphore (a bad name or capacity): it pauses nothing", key)
	case who.PauseUnreadable:
		c.rep.warnf("WARNING: pause key %s holds an unreadable record (%s): %s[max=%d] stays paused until --resume deletes it",
			key, who.SafeText(w.Pause.Err.Error()), name, w.Max)
	}
}

// emptyMessage says that nothing holds, and when --max asked for a capacity,
// names the other capacities that have keys: "no holders
// or waiters for only2[max=3]; keys exist for --max 2". shown are the entries
// listed (with no holder: foreign keys only), all those read.
func emptyMessage(j job, shown, all []who.Entry) string {
	what := j.name
	switch {
	case j.name == "":
		what = "any semaphore"
	case j.max != 0:
		what = fmt.Sprintf("%s[max=%d]", j.name, j.max)
	}
	// a counted key at rank 0 holds unless a pause holds it back (D16c): what is left are
	// waiters of a paused semaphore and foreign keys
	waiting := 0
	for _, e := range shown {
		waiting += boolInt(e.Counted())
	}
	msg := "no holders or waiters for " + what
	if waiting > 0 {
		msg = fmt.Sprintf("no holders for %s: %d waiting, held back by a pause (--resume lifts it)", what, waiting)
	}
	if foreign := len(shown) - waiting; foreign > 0 {
		msg += fmt.Sprintf(" (%d foreign key(s), counted by no conch)", foreign)
	}
	var caps []int // the other capacities: the asked one's keys are what was listed
	for _, e := range all {
		if e.Info.Kind.Counted() && e.Max != j.max && !slices.Contains(caps, e.Max) {
			caps = append(caps, e.Max)
		}
	}
	if j.max != 0 && j.name != "" && len(caps) > 0 {
		slices.Sort(caps)
		msg += "; keys exist for " + joinCaps(caps)
	}
	return msg
}

func boolInt(b bool) int {
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
