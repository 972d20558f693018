package etcdtest

import (
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Restart stops the server at once (Kill), keeps it down for down, then
// starts it again (Revive): an etcd restart as its clients see it
// (connections reset, the store and its revisions kept). It fails t if the
// server does not come back. Not safe to call concurrently with Stop.
func (s *Server) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	s.Kill()
	time.Sleep(down) // the outage itself, not a synchronisation
	s.Revive(t)
}

// Kill stops the server at once (HardStop, no leadership transfer) and
// closes its listeners and connections, keeping its data for Revive: a
// member's death as its clients and peers see it.
func (s *Server) Kill() {
	s.etcd.Server.HardStop()
	s.etcd.Close()
	s.down = true
}

// Revive starts a killed server again with the same data, ports and
// configuration, and waits until it is ready (a cluster member: until it
// has rejoined). It fails t if it cannot.
func (s *Server) Revive(t testing.TB) {
	t.Helper()
	var err error
	for range 50 { // the ports may linger a moment after Close
		var e *embed.Etcd
		if e, err = embed.StartEtcd(s.cfg); err == nil {
			select {
			case <-e.Server.ReadyNotify():
				s.etcd, s.down = e, false
				return
			case <-time.After(readyWait):
				e.Server.HardStop()
				e.Close()
				t.Fatalf("etcdtest: revived etcd not ready after %v", readyWait)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcdtest: cannot revive etcd: %v", err)
}
