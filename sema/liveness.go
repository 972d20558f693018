package sema

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Liveness of the head of the queue's watch (D7b (3)). A member that stops answering without
// closing its connection (stopped, frozen, cut off without a reset) leaves the streams on it
// silent until gRPC's keep-alive gives up on the connection, 13 s later (etcdconn). The head
// of the queue cannot wait that long for a release it must act on, so it checks its stream:
// when the stream has said nothing for probeQuiet it asks for a progress notification, which
// the member answers at once from its own memory (no Raft round, no disk); a stream that has
// said nothing for silentAfter, a progress request included, is taken for dead and the watches
// are made again on a new stream. The same bound applies to the created responses of a new
// stream. Probes cost one small message each way per probeQuiet while nothing happens, and
// never a read of the queue: a live stream is never re-read because of them (D1).
const (
	// probeEvery is how often the head looks at its stream.
	probeEvery = 100 * time.Millisecond
	// probeQuiet: a stream quiet this long is asked for a progress notification.
	probeQuiet = 250 * time.Millisecond
	// silentAfter: a stream quiet this long, with a progress request in flight for
	// silentAfter - probeQuiet at least, is dead.
	silentAfter = 750 * time.Millisecond
	// readTimeout bounds one read of a waiter's position (or a holder's key): a read that
	// went to a silent member is given up and tried again (on the next connection of the
	// round robin) rather than waited on until gRPC closes the connection (13 s). It is
	// generous because a read of a long queue on a loaded etcd must not fail every time.
	readTimeout = 5 * time.Second
)

// resumeFrom is the start of a watch that takes over from one whose last known revision is
// rev (made again on a new stream after a silence, D7b (3)): rev itself, not rev+1. Every
// event after rev comes on the new watch, so nothing needs to be read; the events at rev are
// already known, and each caller skips events at or before rev. Not rev+1: etcd sends no
// progress notification to a watch that starts past its current revision, and the stream
// check lives on them, so such a watch would be taken for silent again and again.
func resumeFrom(rev int64) clientv3.OpOption { return clientv3.WithRev(rev) }

// streamGen numbers the gRPC watch streams of this process. clientv3 puts every watch whose
// context carries the same metadata on one stream, and a new stream goes to the next
// connection of its round robin over the members. A stream found silent moves every later
// watch of the process to a new stream by a new number: the silent connection is left by
// the watches at once rather than when gRPC closes it.
var streamGen atomic.Uint64

// onStream returns ctx with the metadata of the current watch stream generation.
func onStream(ctx context.Context) context.Context {
	g := streamGen.Load()
	if g == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "conch-stream", strconv.FormatUint(g, 10))
}

// leaveStream moves later watches to a new stream, unless another caller did since gen was
// read (one silence, one move).
func leaveStream(gen uint64) { streamGen.CompareAndSwap(gen, gen+1) }

// heard is the instant a watch stream last said something (any response: created,
// progress, events), in nanoseconds since start.
type heard struct {
	start time.Time
	at    atomic.Int64
}

func newHeard() *heard { return &heard{start: time.Now()} }

func (h *heard) now() { h.at.Store(int64(time.Since(h.start))) }

// quiet is how long the stream has said nothing (since h was made, if never).
func (h *heard) quiet() time.Duration { return time.Since(h.start) - time.Duration(h.at.Load()) }

// watchAsync starts c.Watch(ctx, key, opts...) in a goroutine, as clientv3's Watch waits
// for the watch's creation (on a silent stream, until gRPC gives up on the connection), and
// forwards its responses on the returned channel, closed when the watch ends or ctx does.
// done closes when the goroutine has ended: cancel ctx, then wait for it.
func watchAsync(ctx context.Context, c *clientv3.Client, key string, opts ...clientv3.OpOption) (<-chan clientv3.WatchResponse, <-chan struct{}) {
	out := make(chan clientv3.WatchResponse)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for wr := range c.Watch(ctx, key, opts...) {
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, done
}
