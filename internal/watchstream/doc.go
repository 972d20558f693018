// Package watchstream checks that an etcd watch stream still answers (D7b (3)), for the
// recipe (sema: the head of the queue, a holder) and the listing that follows it
// (internal/who). A member that stops answering without closing its connection leaves the
// streams on it silent until gRPC's keep-alive gives up on the connection, 13 s later; a
// watcher that must act on a change cannot wait that long. It looks at its stream (Look):
// when the stream has said nothing for ProbeQuiet it asks for a progress notification, which
// the member answers at once from its own memory (no Raft round, no disk); a stream that has
// said nothing for SilentAfter, a progress request included, is taken for dead, and the
// watcher leaves it (Leave) and watches again on a new stream (On). Probes cost one small
// message each way per ProbeQuiet while nothing happens, and never a read.
//
// It imports the etcd client and gRPC's metadata, no package of conch's.
package watchstream
