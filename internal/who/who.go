package who

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/conch-project/conch/sema/schema"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Format is a listing's form.
type Format string

// The forms of a listing, as Render writes them.
const (
	Text       Format = "text"       // one line per key, PAUSED lines first
	JSON       Format = "json"       // one JSON document: an array of Record
	Prometheus Format = "prometheus" // the Prometheus text exposition (version 0.0.4)
)

// Options say how to render a listing.
type Options struct {
	// Format is the form; "" is Text.
	Format Format
	// Unit names the scope of a holder that runs its command in one; nil
	// shows the record's own unit.
	Unit UnitFunc
}

// Render renders the listing l in the form o.Format says, at time now
// (the metrics' ages, the end of a period): the text and JSON forms with the pauses (D16: a
// PAUSED line first, a "paused" object) and the period markers (D15: a ONCE line, a record
// of kind "once"), the metrics with conch_sema_paused and conch_sema_once_last_success. It does no I/O; its error is the encoder's (none is
// expected), and an unknown Format is rendered as Text.
func Render(l Listing, o Options, now time.Time) ([]byte, error) {
	switch o.Format {
	case JSON:
		return renderJSON(l.Entries, l.Pauses, l.Once, o.Unit)
	case Prometheus:
		return renderPrometheus(l, now)
	}
	return slices.Concat(pauseBanner(l.Pauses), onceBanner(l.Once, now), renderText(l.Entries, o.Unit)), nil
}

// Read's retries of a read etcd could not serve for the moment (transient):
// at most readTries tries, readRetryMin apart, doubling up to readRetryMax,
// about 2 s in all: a leader election's length.
const (
	readTries    = 5
	readRetryMin = 250 * time.Millisecond
	readRetryMax = time.Second
)

// Read returns the listing of the semaphore name (every semaphore when
// name is "": snapshot), with the keys a pause holds back marked as
// waiting (markPausedHeads, D16c) and each holder's lease TTL read,
// best effort (leaseTTLs). A read that etcd answers with a transient
// error (a leader election or a proposal timed out: clientv3 retries
// these for a Get, never for the Txn of snapshot) is tried again, up to
// readTries times in all while ctx allows. It blocks until etcd answers or
// ctx ends. Errors are snapshot's last: sema.ErrRefused when etcd rejects
// the read, else sema.ErrUnavailable.
func Read(ctx context.Context, c *clientv3.Client, name string) (Listing, error) {
	backoff := readRetryMin
	for try := 1; ; try++ {
		l, err := snapshot(ctx, c, name)
		if err == nil {
			markPausedHeads(ctx, c, l)
			leaseTTLs(ctx, c, l.Entries)
			markerTTLs(ctx, c, l.Once)
			return l, nil
		}
		if try == readTries || !transient(err) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return l, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, readRetryMax)
	}
}

// transient reports whether err is etcd saying it cannot serve a request
// now but will soon: gRPC's Unavailable, as in "leader changed", "no
// leader" and "request timed out". A context that ended is not transient.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}

// Filter keeps, with max set (not 0), the entries and pauses of l of that
// capacity; a foreign key, and a pause key that names no semaphore (Max 0),
// is in no capacity: it stays. It does not change l's slices.
func Filter(l Listing, max int) Listing {
	if max == 0 {
		return l
	}
	l.Entries = slices.DeleteFunc(slices.Clone(l.Entries), func(e Entry) bool {
		return e.Info.Kind.Counted() && e.Max != max
	})
	l.Pauses = slices.DeleteFunc(slices.Clone(l.Pauses), func(p schema.Pause) bool { return p.Max != 0 && p.Max != max })
	l.Once = slices.DeleteFunc(slices.Clone(l.Once), func(m schema.Marker) bool { return m.Max != 0 && m.Max != max })
	return l
}

// Held reports whether any entry holds a slot.
func Held(entries []Entry) bool {
	return slices.ContainsFunc(entries, func(e Entry) bool { return e.Held })
}
