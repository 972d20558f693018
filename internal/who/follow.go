package who

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/watchstream"
	"github.com/conch-project/conch/sema"
)

// Timing of followListing. The trade-off: a change shows within about
// followMaxDelay, and a burst of changes costs one read per followMaxDelay
// at most, never one per change.
const (
	// followQuiet: after a change, wait this long for more before reading.
	followQuiet = 30 * time.Millisecond
	// followMaxDelay bounds the wait from the first change of a burst to
	// its read, however long the burst goes on.
	followMaxDelay = 200 * time.Millisecond
	// followProbeEvery: how often an idle follower asks etcd whether it
	// still answers (a watch on a dead connection says nothing).
	followProbeEvery = 2 * time.Second
	// followProbeTimeout bounds one try of a probe, and followProbeTries
	// counts them: etcd that answers none of them is said to be gone.
	followProbeTimeout = time.Second
	followProbeTries   = 3
	// followReadFirst bounds a read's first try, followReadTimeout the
	// second (a long queue on a loaded etcd may need it).
	followReadFirst   = 1500 * time.Millisecond
	followReadTimeout = 5 * time.Second
	// followRetryMin and followRetryMax bound the back-off between
	// re-reads while etcd does not answer.
	followRetryMin = 250 * time.Millisecond
	followRetryMax = 2 * time.Second
)

// NoteKind says what followListing met and is handling.
type NoteKind int

const (
	// NoteCompacted: the watch's revision was compacted away; followListing reads
	// the listing again and watches on from there.
	NoteCompacted NoteKind = iota + 1
	// NoteLost: etcd stopped answering (or the watch failed); followListing
	// retries until it answers again.
	NoteLost
	// NoteResumed: etcd answers again after NoteLost; a fresh listing
	// follows.
	NoteResumed
)

// Note is something followListing met and is handling: the caller may say so.
type Note struct {
	Kind NoteKind
	Rev  int64 // NoteCompacted: the compaction revision
	Err  error // NoteLost: why
}

// followHandler receives what followListing sees. Listing is called with the
// first listing and after each change (a burst of changes coalesced into
// one call); its error ends followListing with that error. Note, if set, is told
// of compactions, lost connections and resumptions.
type followHandler struct {
	Listing func(Listing) error
	Note    func(Note)
}

// followListing calls h.Listing with snapshot(ctx, c, name) and again after each
// change of the keys snapshot reads (the queue, node-wait markers, pause
// keys), watching them from the revision of the last read. Changes that
// come in a burst are coalesced (followQuiet, at most followMaxDelay after
// the first), so there is at most one call per change and a bounded number
// per burst. A compacted watch re-reads and goes on; a failed watch, a
// closed one, or a probe that gets no answer (every followProbeEvery while
// idle) is reported (NoteLost) and retried with back-off until etcd answers
// (NoteResumed). A watch stream that stops answering while etcd does (a
// member stopped with its connection open) is left for another member within
// about a second, without a note. It blocks until ctx ends (returning ctx's error) or
// h.Listing fails (returning its error); the goroutines it starts are
// joined before it returns. The first read fails with sema.ErrRefused or
// sema.ErrUnavailable as snapshot's.
func followListing(ctx context.Context, c *clientv3.Client, name string, h followHandler) error {
	f := &follower{c: c, name: name, h: h}
	rev, err := f.read(ctx)
	if err != nil {
		return err
	}
	var backoff time.Duration
	for {
		began := time.Now()
		if rev, err = f.watch(ctx, rev); err != nil {
			return err
		}
		if time.Since(began) >= followRetryMax || f.moved {
			backoff, f.moved = 0, false // a stream left for another member: at once
			continue
		}
		// a watch that ends as soon as it starts (and a read that
		// succeeds each time) must not make a loop: back off
		backoff = min(max(2*backoff, followRetryMin), followRetryMax)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

type follower struct {
	c        *clientv3.Client
	name     string
	h        followHandler
	silences int  // streams found silent in a row (leave)
	moved    bool // the last watch left a silent stream: watch again at once
}

func (f *follower) note(n Note) {
	if f.h.Note != nil {
		f.h.Note(n)
	}
}

// roots are the prefixes snapshot reads for f.name.
func (f *follower) roots() []string {
	if f.name == "" {
		return []string{sema.KeyRoot, sema.NodeWaitRoot, sema.PauseRoot}
	}
	return []string{sema.NamePrefix(f.name), sema.NodeWaitRoot + f.name + "/", sema.PauseRoot + f.name + "/"}
}

// read takes a snapshot and hands it to the handler. A first try not
// answered within followReadFirst is made again (on the next connection of
// the round robin: a silent member costs that much, not followReadTimeout),
// bounded by followReadTimeout. It returns the snapshot's revision, snapshot's error, or
// the handler's wrapped in errHandler.
func (f *follower) read(ctx context.Context) (int64, error) {
	var l Listing
	var err error
	for _, bound := range []time.Duration{followReadFirst, followReadTimeout} {
		rctx, cancel := context.WithTimeout(ctx, bound)
		l, err = snapshot(rctx, f.c, f.name)
		late := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if !late { // answered, or refused: a try on the next member would not help
			break
		}
	}
	if err != nil {
		return 0, err
	}
	if err := f.h.Listing(l); err != nil {
		return 0, errHandler{err}
	}
	return l.Rev, nil
}

// errHandler wraps the handler's error so that followListing returns it at once.
type errHandler struct{ err error }

func (e errHandler) Error() string { return e.err.Error() }
func (e errHandler) Unwrap() error { return e.err }

// stop reports whether err ends followListing: ctx ended, or the handler failed.
func stop(ctx context.Context, err error) bool {
	var he errHandler
	return ctx.Err() != nil || errors.As(err, &he)
}

// resume re-reads until etcd answers, after telling NoteLost with why,
// backing off between tries; then NoteResumed. It returns the new
// revision, or the error that ends followListing.
func (f *follower) resume(ctx context.Context, why error) (int64, error) {
	f.note(Note{Kind: NoteLost, Err: why})
	backoff := followRetryMin
	for {
		rev, err := f.read(ctx)
		if err == nil {
			f.note(Note{Kind: NoteResumed})
			return rev, nil
		}
		if stop(ctx, err) {
			return 0, unwrapHandler(ctx, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followRetryMax)
	}
}

func unwrapHandler(ctx context.Context, err error) error {
	var he errHandler
	if errors.As(err, &he) {
		return he.err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// watch watches f's roots for changes after rev and re-reads after each burst of
// changes, until the watch must be started again: it returns the revision
// to start from, or the error that ends followListing. It joins its watches
// before it returns.
func (f *follower) watch(ctx context.Context, rev int64) (int64, error) {
	gen := watchstream.Gen()
	wctx, cancel := context.WithCancel(watchstream.On(clientv3.WithRequireLeader(ctx)))
	hd := watchstream.NewHeard()
	msgs, wait := f.watchRoots(wctx, rev, hd)
	defer func() { cancel(); wait() }()
	probe := time.NewTicker(followProbeEvery)
	defer probe.Stop()
	look := time.NewTicker(watchstream.ProbeEvery) // is the stream still answering? (D7b (3))
	defer look.Stop()
	var asked time.Time
	var co coalescer
	defer co.stop()
	for {
		select {
		case <-ctx.Done():
			return rev, ctx.Err()
		case m := <-msgs:
			if !m.closed {
				f.silences = 0
			}
			switch {
			case m.resp.CompactRevision != 0:
				f.note(Note{Kind: NoteCompacted, Rev: m.resp.CompactRevision})
				return f.reread(ctx)
			case m.closed || m.resp.Canceled || m.resp.Err() != nil:
				return f.resume(ctx, watchErr(m))
			case newer(m.resp.Events, rev):
				co.change(time.Now())
			}
		case <-co.c():
			co.fired()
			n, err := f.read(ctx)
			if err != nil {
				return f.afterFailedRead(ctx, err)
			}
			rev = n
		case <-look.C:
			if watchstream.Look(wctx, f.c, hd, 0, &asked) {
				return f.leave(ctx, gen, rev)
			}
		case <-probe.C:
			if err := f.probe(ctx); err != nil {
				return f.resume(ctx, err)
			}
		}
	}
}

// leave moves the watches off a stream that stopped answering (a member stopped or cut off
// with its connection open, D7b (3)): later watches go to a new stream, on the next member,
// and followListing watches again for the changes after rev without a note (a member's failure
// while the others keep quorum needs none). When the new stream is silent too, etcd is
// asked (probe): if it does not answer, the loss is reported and waited out as any other.
func (f *follower) leave(ctx context.Context, gen uint64, rev int64) (int64, error) {
	watchstream.Leave(gen)
	f.moved = true
	if f.silences++; f.silences > 1 {
		if err := f.probe(ctx); err != nil {
			f.silences = 0
			return f.resume(ctx, err)
		}
	}
	return rev, nil
}

// reread reads again after a compaction, resuming if etcd does not answer.
func (f *follower) reread(ctx context.Context) (int64, error) {
	rev, err := f.read(ctx)
	if err != nil {
		return f.afterFailedRead(ctx, err)
	}
	return rev, nil
}

func (f *follower) afterFailedRead(ctx context.Context, err error) (int64, error) {
	if stop(ctx, err) {
		return 0, unwrapHandler(ctx, err)
	}
	return f.resume(ctx, err)
}

// probe asks etcd for one key under the first root (a linearizable read:
// it needs a leader), bounded by followProbeTimeout a try. A try that gets no
// answer is made again, up to followProbeTries in all: each goes to the next
// connection of the client's round robin, so that one silent member is not
// taken for etcd gone. It returns the last try's error.
func (f *follower) probe(ctx context.Context) error {
	var err error
	for range followProbeTries {
		pctx, cancel := context.WithTimeout(ctx, followProbeTimeout)
		_, err = f.c.Get(pctx, f.roots()[0], clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// watchMsg is one response of one of f's watches, or (closed) its end.
type watchMsg struct {
	resp   clientv3.WatchResponse
	closed bool
}

// watchRoots starts a watch on each of f's roots from rev (the changes after it count) and forwards
// their responses on the returned channel. Its goroutines stop when ctx
// ends; the returned func joins them.
func (f *follower) watchRoots(ctx context.Context, rev int64, hd *watchstream.Heard) (<-chan watchMsg, func()) {
	out := make(chan watchMsg)
	var wg sync.WaitGroup
	for _, r := range f.roots() {
		wg.Add(1)
		go func() { // Watch waits for the watch's creation: on a silent stream, long
			defer wg.Done()
			// the events at rev, already in the listing, are not newer
			wch := f.c.Watch(ctx, r, clientv3.WithPrefix(), watchstream.ResumeFrom(rev))
			for {
				resp, ok := <-wch
				hd.Now()
				select {
				case out <- watchMsg{resp: resp, closed: !ok}:
				case <-ctx.Done():
					return
				}
				if !ok {
					return
				}
			}
		}()
	}
	return out, wg.Wait
}

// watchErr says why a watch ended.
func watchErr(m watchMsg) error {
	if err := m.resp.Err(); err != nil {
		return fmt.Errorf("watch failed: %w", err)
	}
	return errors.New("watch closed")
}

// newer reports whether one of events is past rev, the revision of the
// last read (events up to it are already in that listing).
func newer(events []*clientv3.Event, rev int64) bool {
	for _, ev := range events {
		if ev.Kv.ModRevision > rev {
			return true
		}
	}
	return false
}

// coalescer turns a burst of changes into one read: it fires followQuiet
// after the last change, and never later than followMaxDelay after the
// first.
type coalescer struct {
	t     *time.Timer
	first time.Time
	on    bool
}

func (c *coalescer) change(now time.Time) {
	if !c.on {
		c.on, c.first = true, now
	}
	d := min(followQuiet, c.first.Add(followMaxDelay).Sub(now))
	if c.t == nil {
		c.t = time.NewTimer(d)
		return
	}
	c.t.Reset(d) // Go 1.23 timers: no stale tick after Reset
}

// c is the channel that fires when a read is due; nil (never) when none is.
func (c *coalescer) c() <-chan time.Time {
	if !c.on {
		return nil
	}
	return c.t.C
}

func (c *coalescer) fired() { c.on = false }

func (c *coalescer) stop() {
	if c.t != nil {
		c.t.Stop()
	}
}
