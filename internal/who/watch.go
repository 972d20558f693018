package who

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Change is one line of Watch's JSON form less its "time" (RFC 3339 UTC,
// milliseconds) and "revision" (etcd's, of the read), which stamp adds
// first: the listing after a change.
type Change struct {
	Records []Record     `json:"records"` // as Render's JSON
	Paused  []WatchPause `json:"paused"`  // the pause keys found, [] for none
}

// WatchPause is a pause key (D16) as the watch shows it: its key, and who
// paused when and why, decoded as the JSON records' "paused" ("unreadable"
// says what an unreadable record holds).
type WatchPause struct {
	Name string `json:"name"`
	Max  int    `json:"max"` // 0 when the key names no semaphore (a bad name or capacity)
	Key  string `json:"key"`
	Paused
}

// The errors of Watch the caller maps to its own ends.
var (
	// ErrOutputClosed: the reader of the output went away (EPIPE): a watch
	// piped into head(1) ends there.
	ErrOutputClosed = errors.New("output closed")
	// ErrOutput: a listing could not be rendered or written (a full disk,
	// an I/O error); the error wrapping it says why.
	ErrOutput = errors.New("listing not written")
)

// outputError is a listing that could not be rendered or written: it is
// ErrOutput, and says why.
type outputError struct{ error }

func (outputError) Is(target error) bool { return target == ErrOutput }
func (e outputError) Unwrap() error      { return e.error }

// defaultReadTimeout bounds each listing's reads beyond the listing itself
// when WatchOptions.ReadTimeout is 0.
const defaultReadTimeout = 5 * time.Second

// WatchOptions say what Watch shows and where.
type WatchOptions struct {
	Options // Format: Text or JSON (one document per line)
	// Max keeps one capacity (Filter); 0 keeps every one.
	Max int
	// Out gets each listing as a timestamped block or line.
	Out io.Writer
	// Warn, if set, is told what is wrong: EntryWarnings of the first
	// listing, and PauseWarnings of each pause key when it first shows.
	Warn func(Warning)
	// Note, if set, is told of compactions, lost connections and
	// resumptions (Note), for the caller to say.
	Note func(Note)
	// ReadTimeout bounds each listing's reads beyond the listing itself
	// (markPausedHeads, the lease TTLs); 0 is 5 s.
	ReadTimeout time.Duration
}

// Watch writes the listing of the semaphore name (every semaphore when
// name is "") to o.Out, then again at each change (followListing: bursts
// coalesced, compactions and outages survived and told to o.Note), as a
// text block headed "--- TIME rev=N" or one JSON document per line (D6b);
// a listing identical to the last one written is not written again. It
// blocks until ctx ends (returning ctx's error), the output's reader goes
// away (ErrOutputClosed: at a write, or, for a pipe or a socket, within
// about closedPoll whether or not anything changes, D6c), or a listing
// cannot be rendered or written (an error wrapping ErrOutput). A first
// read that fails returns sema.ErrRefused or sema.ErrUnavailable as
// snapshot, after Read's retries of a transient error (D6e). The
// goroutines it starts (followListing's, and one that polls a pipe's or socket's
// reader) end before it returns.
func Watch(ctx context.Context, c *clientv3.Client, name string, o WatchOptions) error {
	if o.ReadTimeout == 0 {
		o.ReadTimeout = defaultReadTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer watchClosed(ctx, o.Out, cancel)()
	w := &watcher{o: o, client: c, ctx: ctx}
	join := w.refresh(ctx, cancel)
	err := w.follow(ctx, name)
	cancel(nil)
	join()
	var oe outputError
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrOutputClosed):
		return ErrOutputClosed
	case errors.As(cause, &oe): // the refresh could not write
		return oe
	}
	return err
}

// follow runs followListing, starting it again when its first read fails
// with a transient error (an election: Read's rule), at most readTries
// times: once a listing is shown, followListing rides out such errors itself.
func (w *watcher) follow(ctx context.Context, name string) error {
	backoff := readRetryMin
	for try := 1; ; try++ {
		err := followListing(ctx, w.client, name, followHandler{Listing: w.show, Note: w.o.Note, FirstRead: w.o.ReadTimeout})
		if w.shown || try == readTries || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, readRetryMax)
	}
}

// watcher is one Watch: what show needs between calls.
type watcher struct {
	o      WatchOptions
	client *clientv3.Client
	ctx    context.Context
	warned bool
	shown  bool             // a listing reached show: followListing's first read is done
	last   []byte           // the last listing shown, without its time stamp
	paused map[string]int64 // pause key -> create revision, of the pause keys already warned of
	// mu serialises show between followListing and the refresh (refresh): latest is the
	// last listing read, shown again each refreshEvery with its TTLs read anew
	mu     sync.Mutex
	latest Listing
}

// refreshEvery is how often --watch reads the holders' lease TTLs again and shows the listing
// if they changed, even when etcd is quiet: a holder whose conch is dead shows `expiring`
// and its TTL running down within about this long, not only when its key goes.
const refreshEvery = time.Second

// refresh shows w.latest again every refreshEvery (show reads the TTLs anew; an unchanged
// listing is not written), once a first listing was shown, until ctx ends or a show fails:
// it cancels ctx with that error. The caller joins it with the returned func.
func (w *watcher) refresh(ctx context.Context, cancel context.CancelCauseFunc) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(refreshEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			w.mu.Lock()
			shown, l := w.shown, w.latest
			w.mu.Unlock()
			if !shown {
				continue
			}
			if err := w.show(l); err != nil {
				cancel(err)
				return
			}
		}
	}()
	return func() { <-done }
}

// show renders one listing and writes it unless it is the same as the
// last one shown. The first listing's entry warnings go to o.Warn.
func (w *watcher) show(l Listing) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shown, w.latest = true, l
	tctx, cancel := context.WithTimeout(w.ctx, w.o.ReadTimeout)
	markPausedHeads(tctx, w.client, l)
	leaseTTLs(tctx, w.client, l.Entries)
	markerTTLs(tctx, w.client, l.Once)
	cancel()
	if !w.warned {
		w.warn(EntryWarnings(l.Entries))
		w.warned = true
	}
	w.warn(PauseWarnings(w.newPauses(l.Pauses)))
	l = Filter(l, w.o.Max)
	body, err := w.body(l)
	if err != nil {
		return outputError{fmt.Errorf("cannot render the listing as %s: %w", w.o.Format, err)}
	}
	if bytes.Equal(body, w.last) {
		return nil
	}
	w.last = body
	out := w.stamp(body, l.Rev, time.Now())
	if _, err := w.o.Out.Write(out); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return ErrOutputClosed
		}
		return outputError{fmt.Errorf("cannot write the listing: %w", err)}
	}
	return nil
}

func (w *watcher) warn(ws []Warning) {
	if w.o.Warn == nil {
		return
	}
	for _, x := range ws {
		w.o.Warn(x)
	}
}

// newPauses returns the pauses of ps not seen by an earlier listing (by
// key and create revision), so that a bad pause key (PauseWarnings) is
// said once, when it appears, however many listings show it.
func (w *watcher) newPauses(ps []schema.Pause) []schema.Pause {
	if w.paused == nil {
		w.paused = map[string]int64{}
	}
	var fresh []schema.Pause
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
// one line of JSON, or the text lines of Render (the PAUSED lines first,
// D16), "(no holders or waiters)" when there are none.
func (w *watcher) body(l Listing) ([]byte, error) {
	if w.o.Format == JSON {
		doc := Change{Records: make([]Record, 0, len(l.Entries)), Paused: make([]WatchPause, 0, len(l.Pauses))}
		byCap := map[capKey]*Paused{}
		for _, p := range l.Pauses {
			wp := toPaused(p)
			byCap[capKey{p.Name, p.Max}] = wp
			doc.Paused = append(doc.Paused, WatchPause{Name: p.Name, Max: p.Max, Key: p.Key, Paused: *wp})
		}
		for _, m := range l.Once { // the period markers (D15), as in Render's JSON
			doc.Records = append(doc.Records, onceRecord(m))
		}
		for _, e := range l.Entries { // each record carries its capacity's pause, as in Render's JSON
			r := toRecord(e, w.o.Unit)
			r.Paused = byCap[capKey{e.Name, e.Max}]
			doc.Records = append(doc.Records, r)
		}
		return json.Marshal(doc)
	}
	if len(l.Entries) == 0 && len(l.Pauses) == 0 && len(l.Once) == 0 {
		return []byte("(no holders or waiters)\n"), nil
	}
	return slices.Concat(pauseBanner(l.Pauses), onceBanner(l.Once, time.Now()), renderText(l.Entries, w.o.Unit)), nil
}

// stamp adds when and at which revision: a "--- TIME rev=N" line before
// the text block, or the fields "time" and "revision" first in the JSON
// document, on one line.
func (w *watcher) stamp(body []byte, rev int64, now time.Time) []byte {
	ts := now.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if w.o.Format == JSON { // body is a JSON object: add the two fields first
		doc := fmt.Appendf(nil, `{"time":%q,"revision":%d,`, ts, rev)
		return append(append(doc, body[1:]...), '\n')
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "--- %s rev=%d\n", ts, rev)
	b.Write(body)
	return b.Bytes()
}
