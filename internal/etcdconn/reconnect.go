package etcdconn

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// reconnect is how gRPC connects again to a member whose connection failed (D7g). gRPC's default
// back-off grows from 1 s by 1.6 times per failed try up to 120 s: after an etcd outage of a
// minute or two a conch tried again only every minute or two, so it learnt that etcd was back
// up to two minutes late, and the waiters' leases could expire meanwhile (their keep-alives
// had no connection to go on). Capped at reconnectMaxDelay, a conch is connected again within
// about that long after any outage, however long it was; each try is one TCP connection (and
// TLS handshake) per member, a cost etcd does not feel at one a second per process.
// MinConnectTimeout keeps gRPC's 20 s for one try, so a slow handshake is not cut short.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  reconnectBaseDelay,
		Multiplier: backoff.DefaultConfig.Multiplier,
		Jitter:     backoff.DefaultConfig.Jitter,
		MaxDelay:   reconnectMaxDelay,
	},
	MinConnectTimeout: 20 * time.Second,
}

// The bounds of the reconnect back-off: the first try again after about reconnectBaseDelay,
// never more than reconnectMaxDelay (plus 20 % jitter) between two tries.
const (
	reconnectBaseDelay = 250 * time.Millisecond
	reconnectMaxDelay  = time.Second
)
