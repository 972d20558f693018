package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
)

// watchChange is one line of `--who --watch --json` less its "time" (RFC
// 3339 UTC, milliseconds) and "revision" (etcd's, of the read), which
// stamp adds first: the listing after a change.
type watchChange struct {
	Records []whoRecord  `json:"records"` // as --who --json
	Paused  []watchPause `json:"paused"`  // the pause keys found, [] for none
}

// watchPause is a pause key (--pause) as the watch shows it: its key, and
// who paused when and why, decoded as --who --json's "paused" (D16;
// "unreadable" says what an unreadable record holds).
type watchPause struct {
	Name string `json:"name"`
	Max  int    `json:"max"` // 0 when the key names no semaphore (a bad name or capacity)
	Key  string `json:"key"`
	whoPause
}

// errOutputClosed: the reader of stdout went away (EPIPE): a watch piped
// into `head` ends there, cleanly.
var errOutputClosed = errors.New("stdout closed")

// watchWho is `--who --watch`: the listing, then again at each change
// (sema.Follow: bursts coalesced, compactions and outages survived and said
// on stderr), as a timestamped text block or one JSON document per line.
// It ends only by a signal (SIGINT, SIGTERM, SIGHUP: conch dies of it, D3),
// when stdout's reader goes away (status 0), or when stdout cannot be
// written (errWhoOutput). A first read that fails is errUnavailable, or errUsage when
// etcd refuses it (exitStatus maps them).
func (c *semaCmd) watchWho(j job, what string, client *clientv3.Client) error {
	ctx, stopSignals := signalContext()
	defer stopSignals()
	w := &whoWatch{c: c, j: j, client: client, ctx: ctx}
	err := sema.Follow(ctx, client, j.name, sema.FollowHandler{Listing: w.show, Note: w.note})
	var sig errSignal
	switch {
	case errors.As(context.Cause(ctx), &sig):
		return signalExit(sig.sig, "", "")
	case errors.Is(err, errOutputClosed):
		return nil
	case errors.Is(err, sema.ErrRefused):
		return endf(errUsage, "", "%s: %s refused the read: %v", what, j.conn.Where(), err)
	case errors.Is(err, sema.ErrUnavailable):
		return endf(errUnavailable, "", "%s: cannot read from %s: %v", what, j.conn.Where(), err)
	}
	return endf(errWhoOutput, "", "%s: cannot write the listing: %v", what, err)
}

// whoWatch is one --who --watch run: what show needs between calls.
type whoWatch struct {
	c      *semaCmd
	j      job
	client *clientv3.Client
	ctx    context.Context
	warned bool
	last   []byte           // the last listing shown, without its time stamp
	paused map[string]int64 // pause key -> create revision, of the pause keys already said on stderr
}

// show renders one listing and writes it unless it is the same as the
// last one shown. The first listing's loud lines (warnWho) go to stderr.
func (w *whoWatch) show(l sema.Listing) error {
	tctx, cancel := context.WithTimeout(w.ctx, w.j.conn.DialTimeout)
	sema.LeaseTTLs(tctx, w.client, l.Entries)
	cancel()
	if !w.warned {
		warnWho(w.c.rep.warnf, l.Entries)
		w.warned = true
	}
	warnPauses(w.c.rep.warnf, w.newPauses(l.Pauses))
	l = filterMax(l, w.j.max)
	body, err := w.body(l)
	if err != nil || bytes.Equal(body, w.last) {
		return err
	}
	w.last = body
	out := w.stamp(body, l.Rev, time.Now())
	if _, err := w.c.stdout.Write(out); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return errOutputClosed
		}
		return err
	}
	return nil
}

// newPauses returns the pauses of ps not seen by an earlier listing (by
// key and create revision), so that a bad pause key (warnPauses) is said
// once, when it appears, however many listings show it.
func (w *whoWatch) newPauses(ps []sema.Pause) []sema.Pause {
	if w.paused == nil {
		w.paused = map[string]int64{}
	}
	var fresh []sema.Pause
	seen := make(map[string]int64, len(ps))
	for _, p := range ps {
		if rev, ok := w.paused[p.Key]; !ok || rev != p.Rev {
			fresh = append(fresh, p)
		}
		seen[p.Key] = p.Rev
	}
	w.paused = seen
	return fresh
}

// body is the listing without its time stamp: the records and pauses as
// one line of JSON, or the text lines of --who (the PAUSED lines first,
// D16), "(no holders or waiters)" when there are none.
func (w *whoWatch) body(l sema.Listing) ([]byte, error) {
	if w.j.who.format == "json" {
		doc := watchChange{Records: make([]whoRecord, 0, len(l.Entries)), Paused: make([]watchPause, 0, len(l.Pauses))}
		byCap := map[capKey]*whoPause{}
		for _, p := range l.Pauses {
			wp := toWhoPause(p)
			byCap[capKey{p.Name, p.Max}] = wp
			doc.Paused = append(doc.Paused, watchPause{Name: p.Name, Max: p.Max, Key: p.Key, whoPause: *wp})
		}
		for _, e := range l.Entries { // each record carries its capacity's pause, as in --who --json
			r := toWhoRecord(e)
			r.Paused = byCap[capKey{e.Name, e.Max}]
			doc.Records = append(doc.Records, r)
		}
		return json.Marshal(doc)
	}
	if len(l.Entries) == 0 && len(l.Pauses) == 0 {
		return []byte("(no holders or waiters)\n"), nil
	}
	return append(pauseBanner(l.Pauses), renderText(l.Entries)...), nil
}

// stamp adds when and at which revision: a "--- TIME rev=N" line before
// the text block, or the fields "time" and "revision" first in the JSON
// document, on one line.
func (w *whoWatch) stamp(body []byte, rev int64, now time.Time) []byte {
	ts := now.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if w.j.who.format == "json" { // body is a JSON object: add the two fields first
		doc := fmt.Appendf(nil, `{"time":%q,"revision":%d,`, ts, rev)
		return append(append(doc, body[1:]...), '\n')
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "--- %s rev=%d\n", ts, rev)
	b.Write(body)
	return b.Bytes()
}

// note says on stderr what the watch met and is handling.
func (w *whoWatch) note(n sema.Note) {
	switch n.Kind {
	case sema.NoteCompacted:
		w.c.rep.warnf("--who --watch: etcd compacted its history past our watch (revision %d): read again, watching on", n.Rev)
	case sema.NoteLost:
		w.c.rep.warnf("--who --watch: lost %s (%v): retrying", w.j.conn.Where(), n.Err)
	case sema.NoteResumed:
		w.c.rep.warnf("--who --watch: etcd answers again: read again, watching on")
	}
}
