package etcdconn

import "time"

// gRPC keep-alive of every connection to a member. A member that is cut off (its packets
// black-holed, no RST) or frozen leaves our TCP connection ESTABLISHED, and clientv3 spreads
// its streams over all endpoints: without a liveness check a waiter's watch can sit on that
// member forever while the slot it waits for is free (tests/vm scenarios 3 and 4). With
// keep-alive, a connection that has carried nothing for keepAliveTime is pinged; no answer
// within keepAliveTimeout closes it, its streams fail, and clientv3 opens them again on a live
// member, from the revision they had reached (no event is lost).
//
// keepAliveTime is 10 s because gRPC refuses less (grpc-go raises any smaller value to its
// floor of 10 s, internal.KeepaliveMinPingTime), and an etcd server accepts pings every 5 s
// (--grpc-keepalive-min-time). So a dead member is noticed within 10 s + 3 s = 13 s of its
// last answer. For holders that bound does not matter: they fence on their own lease deadline
// (D7: at TTL - kill-after - 1 s without a confirmed keep-alive, 4 s with the default TTL 10 s
// and --kill-after 5 s), whatever the connection says. For waiters it bounds how long a freed
// slot can stay idle because of a dead member: 13 s at most, about one default TTL. Pings are
// sent only while a stream is open (PermitWithoutStream off: etcd's server refuses pings
// without streams), which is whenever conch waits or holds.
const (
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 3 * time.Second
)
