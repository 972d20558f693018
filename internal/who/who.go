package who

import (
	"context"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
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
// (the metrics' ages): the text and JSON forms with the pauses (D16: a
// PAUSED line first, a "paused" object), the metrics with
// conch_sema_paused. It does no I/O; its error is the encoder's (none is
// expected), and an unknown Format is rendered as Text.
func Render(l sema.Listing, o Options, now time.Time) ([]byte, error) {
	switch o.Format {
	case JSON:
		return renderJSON(l.Entries, l.Pauses, o.Unit)
	case Prometheus:
		return renderPrometheus(l, now)
	}
	return append(pauseBanner(l.Pauses), renderText(l.Entries, o.Unit)...), nil
}

// Read returns the listing of the semaphore name (every semaphore when
// name is "": sema.Snapshot) with each holder's lease TTL read, best
// effort (sema.LeaseTTLs). It blocks until etcd answers or ctx ends.
// Errors are Snapshot's: sema.ErrRefused when etcd rejects the read,
// else sema.ErrUnavailable.
func Read(ctx context.Context, c *clientv3.Client, name string) (sema.Listing, error) {
	l, err := sema.Snapshot(ctx, c, name)
	if err != nil {
		return l, err
	}
	sema.LeaseTTLs(ctx, c, l.Entries)
	return l, nil
}

// Filter keeps, with max set (not 0), the entries and pauses of l of that
// capacity; a foreign key, and a pause key that names no semaphore (Max 0),
// is in no capacity: it stays. It does not change l's slices.
func Filter(l sema.Listing, max int) sema.Listing {
	if max == 0 {
		return l
	}
	l.Entries = slices.DeleteFunc(slices.Clone(l.Entries), func(e sema.Entry) bool {
		return e.Info.Kind.Counted() && e.Max != max
	})
	l.Pauses = slices.DeleteFunc(slices.Clone(l.Pauses), func(p sema.Pause) bool { return p.Max != 0 && p.Max != max })
	return l
}

// Held reports whether any entry holds a slot.
func Held(entries []sema.Entry) bool {
	return slices.ContainsFunc(entries, func(e sema.Entry) bool { return e.Held })
}
