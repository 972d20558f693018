package etcdtest

import (
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Restart stops the server at once (HardStop, as Stop), keeps it down for
// down, then starts it again with the same data, ports and configuration
// and waits until it is ready: an etcd restart as its clients see it
// (connections reset, the store and its revisions kept). It fails t if the
// server does not come back. Not safe to call concurrently with Stop.
func (s *Server) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	s.etcd.Server.HardStop()
	s.etcd.Close()
	time.Sleep(down) // the outage itself, not a synchronisation
	var err error
	for range 50 { // the ports may linger a moment after Close
		var e *embed.Etcd
		if e, err = embed.StartEtcd(s.cfg); err == nil {
			select {
			case <-e.Server.ReadyNotify():
				s.etcd = e
				return
			case <-time.After(readyWait):
				e.Server.HardStop()
				e.Close()
				t.Fatalf("etcdtest: restarted etcd not ready after %v", readyWait)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcdtest: cannot restart etcd: %v", err)
}
