package vm

import (
	"testing"
	"time"
)

// handoff is one hand-off's bound on a loaded shared machine: release (one LeaseRevoke), the
// waiter's watch event, its scope and exec. Measured medians are 20-100 ms (README.md); this
// margin is for 2 cores shared by several test binaries, far below any TTL-sized stall.
const handoff = 2 * time.Second

// TestMultiNode proves the cluster-wide promise on 3 real systemd nodes with a real 3-member
// etcd cluster and real faults. The scenarios share one cluster; each prints its
// figures (t.Logf) and checks the history (check_test.go).
func TestMultiNode(t *testing.T) {
	c := newCluster(t)
	t.Run("1-CapacityAcrossNodes", func(t *testing.T) { testCapacity(t, c) })
	t.Run("2-PowerLossOfHolder", func(t *testing.T) { testPowerLoss(t, c) })
	t.Run("3-PartitionLinkCut", func(t *testing.T) { testPartition(t, c, "s3-cut", c.nw.Cut) })
	t.Run("3b-PartitionOneWay", func(t *testing.T) { testPartition(t, c, "s3b-oneway", c.nw.DropOutgoing) })
	t.Run("4-StallByFreeze", func(t *testing.T) { testStall(t, c) })
	t.Run("5-LeaderLoss", func(t *testing.T) { testLeaderLoss(t, c) })
	t.Run("6-QuorumLoss", func(t *testing.T) { testQuorumLoss(t, c) })
	t.Run("7-Compaction", func(t *testing.T) { testCompaction(t, c) })
	t.Run("9-QueueOf200", func(t *testing.T) { testQueue(t, c) })
	t.Run("8-ContribTimerOnAllNodes", func(t *testing.T) { testTimer(t, c) })
	t.Run("10-Spread", func(t *testing.T) { testSpread(t, c) })
	t.Run("10b-SpreadPowerLoss", func(t *testing.T) { testSpreadPowerLoss(t, c) })
	t.Run("11-OncePerHA", func(t *testing.T) { testOncePerHA(t, c) })
	t.Run("12-PauseAcrossNodes", func(t *testing.T) { testPauseAcrossNodes(t, c) })
	t.Run("13-RollingReboot", func(t *testing.T) { testRollingReboot(t, c) })
	t.Run("14-SilentMember", func(t *testing.T) { testSilentMember(t, c) })
	t.Run("15-FleetLockRollingReboot", func(t *testing.T) { testFleetLockReboot(t, c) })
}

// Scenario 1: N=2, 3 nodes x 10 jobs started together with random durations: at most 2 at
// once, never an idle slot with waiters for longer than a hand-off.
func testCapacity(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s1-capacity", 2)
	began := time.Now()
	s.jobsAcross(3*10, nil, 50*time.Millisecond, 400*time.Millisecond)
	s.wantAllDone()
	t.Logf("scenario 1: 30 jobs on 3 nodes done in %v", ms(time.Since(began)))
	r := s.verify(checkSpec{Handoff: handoff})
	if r.Children != 30 || r.MaxConcurrent != 2 {
		t.Errorf("%d children ran, at most %d at once; want 30, and 2 at once", r.Children, r.MaxConcurrent)
	}
}
