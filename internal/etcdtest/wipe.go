package etcdtest

import (
	"os"
	"testing"
)

// RestartEmpty stops the server at once (Kill), removes its data directory and starts it
// again (Revive) on the same ports and configuration with an empty store: etcd losing its
// state as its clients see it (its revisions start again from 1; leases and keys are gone).
// It fails t if the directory cannot be removed or the server does not come back.
func (s *Server) RestartEmpty(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := os.RemoveAll(s.cfg.Dir); err != nil {
		t.Fatalf("etcdtest: cannot wipe %s: %v", s.cfg.Dir, err)
	}
	s.Revive(t)
}

// ClusterID is the ID of the cluster the server is a member of, as its answers' headers
// carry it.
func (s *Server) ClusterID() uint64 { return uint64(s.etcd.Server.Cluster().ID()) }

// IsLeader reports whether the server is its cluster's leader now.
func (s *Server) IsLeader() bool { return s.etcd.Server.Leader() == s.etcd.Server.MemberID() }

// HasLeader reports whether the server knows a leader of its cluster now (false: it lost
// its quorum, or an election is under way).
func (s *Server) HasLeader() bool { return s.etcd.Server.Leader() != 0 }
