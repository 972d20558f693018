package sema

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/watchstream"
)

// Liveness of the head of the queue's watch and a holder's (D7b (3)): internal/watchstream
// checks that a stream still answers and moves the watches off one that does not. The head
// of the queue cannot wait 13 s (gRPC's keep-alive, etcdconn) for a release it must act on.
// Probes cost one small message each way per probeQuiet while nothing happens, and never a
// read of the queue: a live stream is never re-read because of them (D1).
const (
	probeEvery  = watchstream.ProbeEvery
	probeQuiet  = watchstream.ProbeQuiet
	silentAfter = watchstream.SilentAfter
	// readTimeout bounds one read of a waiter's position (or a holder's key): a read that
	// went to a silent member is given up and tried again (on the next connection of the
	// round robin) rather than waited on until gRPC closes the connection (13 s). It is
	// generous because a read of a long queue on a loaded etcd must not fail every time.
	readTimeout = 5 * time.Second
)

// resumeFrom is watchstream.ResumeFrom: a watch made again on a new stream after a silence
// starts at the last known revision.
func resumeFrom(rev int64) clientv3.OpOption { return watchstream.ResumeFrom(rev) }

// streamGen is the process's watch stream generation (watchstream.Gen), read before a
// watch is made so that leaveStream moves off that stream only.
var streamGen generation

type generation struct{}

func (generation) Load() uint64 { return watchstream.Gen() }

// onStream returns ctx naming the current watch stream (watchstream.On).
func onStream(ctx context.Context) context.Context { return watchstream.On(ctx) }

// leaveStream moves later watches to a new stream (watchstream.Leave).
func leaveStream(gen uint64) { watchstream.Leave(gen) }

// heard is the instant a watch stream last said something (watchstream.Heard).
type heard struct{ *watchstream.Heard }

func newHeard() *heard { return &heard{watchstream.NewHeard()} }

func (h *heard) now() { h.Now() }

// quiet is how long the stream has said nothing (since h was made, if never).
func (h *heard) quiet() time.Duration { return h.Quiet() }

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
