package watchstream

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The stream check's timing.
const (
	// ProbeEvery is how often a watcher looks at its stream.
	ProbeEvery = 100 * time.Millisecond
	// ProbeQuiet: a stream quiet this long is asked for a progress notification.
	ProbeQuiet = 250 * time.Millisecond
	// SilentAfter: a stream quiet this long, with a progress request in flight for
	// SilentAfter - ProbeQuiet at least, is dead.
	SilentAfter = 750 * time.Millisecond
)

// Heard is the instant a watch stream last said something (any response: created,
// progress, events). Its methods are safe for concurrent use: the goroutine that reads the
// watch calls Now, the one that looks at the stream reads it.
type Heard struct {
	start time.Time
	at    atomic.Int64 // nanoseconds since start; 0: never
}

// NewHeard returns a Heard that has heard nothing yet, its quiet counted from now.
func NewHeard() *Heard { return &Heard{start: time.Now()} }

// Now records that the stream said something.
func (h *Heard) Now() { h.at.Store(int64(time.Since(h.start))) }

// Quiet is how long the stream has said nothing (since h was made, if never).
func (h *Heard) Quiet() time.Duration { return time.Since(h.start) - time.Duration(h.at.Load()) }

// Never reports whether the stream has said nothing since h was made.
func (h *Heard) Never() bool { return h.at.Load() == 0 }

// Look is one look at the stream that ctx names (its metadata, On), whose responses h
// records. It reports true (silent) when the stream said nothing for SilentAfter, or for
// first (if not 0) before its first response. Otherwise, when the stream said nothing for
// ProbeQuiet, it asks cl for a progress notification on it, at most once per ProbeQuiet
// (*asked is when it last did; Look updates it), giving up on the request after ProbeEvery
// (not sent: the next look sends again, or finds silence), and reports false.
func Look(ctx context.Context, cl *clientv3.Client, h *Heard, first time.Duration, asked *time.Time) bool {
	q := h.Quiet()
	if q >= SilentAfter || (first > 0 && h.Never() && q >= first) {
		return true
	}
	if q >= ProbeQuiet && time.Since(*asked) >= ProbeQuiet {
		*asked = time.Now()
		AskProgress(ctx, cl, ProbeEvery)
	}
	return false
}

// AskProgress requests a progress notification on the watch stream that ctx names (its
// metadata, On), giving up after within; whether it was sent is not reported.
func AskProgress(ctx context.Context, cl *clientv3.Client, within time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, within)
	_ = cl.RequestProgress(rctx)
	cancel()
}
