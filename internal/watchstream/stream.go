package watchstream

import (
	"context"
	"strconv"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// gen numbers the gRPC watch streams of this process. clientv3 puts every watch whose
// context carries the same metadata on one stream, and a new stream goes to the next
// connection of its round robin over the members. A stream found silent moves every later
// watch of the process to a new stream by a new number: the silent connection is left by
// the watches at once rather than when gRPC closes it.
var gen atomic.Uint64

// Gen returns the current stream generation, for a later Leave.
func Gen() uint64 { return gen.Load() }

// On returns ctx with the metadata of the current stream generation: a watch made with it
// goes on that generation's stream.
func On(ctx context.Context) context.Context {
	g := gen.Load()
	if g == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "conch-stream", strconv.FormatUint(g, 10))
}

// Leave moves later watches to a new stream, unless another caller did since g was read
// with Gen (one silence, one move).
func Leave(g uint64) { gen.CompareAndSwap(g, g+1) }

// ResumeFrom is the start of a watch that takes over from one whose last known revision is
// rev (made again on a new stream after a silence): rev itself, not rev+1. Every event after
// rev comes on the new watch, so nothing needs to be read; the events at rev are already
// known, and each caller skips events at or before rev. Not rev+1: etcd sends no progress
// notification to a watch that starts past its current revision, and the stream check lives
// on them, so such a watch would be taken for silent again and again.
func ResumeFrom(rev int64) clientv3.OpOption { return clientv3.WithRev(rev) }
