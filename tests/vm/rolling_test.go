package vm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/sema/schema"
)

// Scenario 13: a rolling reboot of the three nodes with the contrib units
// (conch-rolling-reboot.service, conch-rolling-reboot-release.service; D13, D14): each node
// that asks reboots for real (`systemctl reboot` inside it; the harness boots it again on the
// same disk once it is down), never two at once: while a node is down or booting, the others'
// runs exit 75; each next reboot starts only after the previous node's boot unit released the
// slot. Last, a node that never comes back frees the slot after --hold-after.
func testRollingReboot(t *testing.T, c *cluster) {
	s := c.newScenario(t, "rolling-reboot", 1)
	for i, n := range c.nodes {
		s.installRolling(i, n, "")
	}
	pending := map[int]bool{0: true, 1: true, 2: true}
	var lastRelease time.Time
	for round := 0; len(pending) > 0; round++ {
		asked := time.Now()
		for i := range pending {
			s.startUnit(c.nodes[i], "conch-rolling-reboot.service")
		}
		down := s.awaitDown(pending)
		wentDown := time.Now()
		if !lastRelease.IsZero() && wentDown.Before(lastRelease) {
			t.Fatalf("round %d: %s went down before the previous release", round, c.nodes[down].Name())
		}
		delete(pending, down)
		for i := range pending { // the others find the slot held while the node is down
			s.skipRound(c.nodes[i], "conch-rolling-reboot.service")
			if c.nodes[i].Init() == 0 || !procAlive(c.nodes[i].Init()) {
				t.Fatalf("round %d: %s went down while %s was down", round, c.nodes[i].Name(), c.nodes[down].Name())
			}
		}
		if s.keys() != 1 {
			t.Fatalf("round %d: %d keys while %s is down, want its held-after key", round, s.keys(), c.nodes[down].Name())
		}
		s.bootAgain(down)
		booted := time.Now()
		s.waitFor("the boot unit to release the slot", func() bool { return s.keys() == 0 })
		lastRelease = time.Now()
		t.Logf("scenario 13 round %d: %s asked %v before it went down, was booted again %v later, released %v after its boot",
			round, c.nodes[down].Name(), ms(wentDown.Sub(asked)), ms(booted.Sub(wentDown)), ms(lastRelease.Sub(booted)))
	}
	s.neverBack(0, 15*time.Second)
}

// installRolling copies the contrib units into node i unchanged, with conch at /usr/bin/conch,
// the endpoints in a drop-in and holdAfter (when not "") replacing the contrib's --hold-after;
// enables the boot unit and flags the node as needing a reboot.
func (s *scenario) installRolling(i int, n *systemdtest.Node, holdAfter string) {
	s.t.Helper()
	service := contribUnit(s.t, "conch-rolling-reboot.service")
	if holdAfter != "" {
		service = strings.ReplaceAll(service, "--hold-after 30m", "--hold-after "+holdAfter)
	}
	env := "[Service]\nEnvironment=CONCH_ENDPOINTS=" + strings.Join(s.etcd.Endpoints(i), ",") + "\n"
	for path, data := range map[string]string{
		"/etc/systemd/system/conch-rolling-reboot.service":                          service,
		"/etc/systemd/system/conch-rolling-reboot-release.service":                  contribUnit(s.t, "conch-rolling-reboot-release.service"),
		"/etc/systemd/system/conch-rolling-reboot.service.d/endpoints.conf":         env,
		"/etc/systemd/system/conch-rolling-reboot-release.service.d/endpoints.conf": env,
	} {
		if err := n.WriteFile(s.ctx, path, []byte(data), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	for _, argv := range [][]string{{"ln", "-sf", conch, "/usr/bin/conch"}, {"touch", "/run/reboot-required"},
		{"systemctl", "daemon-reload"}, {"systemctl", "enable", "conch-rolling-reboot-release.service"}} {
		if res, err := n.Nsenter(s.ctx, argv...); err != nil {
			s.t.Fatalf("%s on %s: %v %s", argv, n.Name(), err, res.Stderr)
		}
	}
}

// startUnit starts unit on n without waiting for it.
func (s *scenario) startUnit(n *systemdtest.Node, unit string) {
	s.t.Helper()
	if _, err := n.Systemctl(s.ctx, "start", "--no-block", unit); err != nil {
		s.t.Fatalf("start %s on %s: %v", unit, n.Name(), err)
	}
}

// skipRound starts unit (conch-rolling-reboot.service) on n and waits for it to end
// (`systemctl start` of a oneshot returns when it has run); it wants this run to have been a
// skip: one more "no free slot" line of conch in the unit's journal (exit 75, a success by
// SuccessExitStatus=75).
func (s *scenario) skipRound(n *systemdtest.Node, unit string) {
	s.t.Helper()
	count := func() int {
		res, err := n.Nsenter(s.ctx, "journalctl", "--no-pager", "-q", "-u", unit)
		if err != nil {
			s.t.Fatalf("journal of %s on %s: %v", unit, n.Name(), err)
		}
		return strings.Count(string(res.Stdout), "no free slot: all 1 held")
	}
	before := count()
	if res, err := n.Systemctl(s.ctx, "start", unit); err != nil {
		s.t.Fatalf("start %s on %s: %v %s", unit, n.Name(), err, res.Stderr)
	}
	if after := count(); after != before+1 {
		s.t.Errorf("%s on %s: %d skips in the journal after one more run, want %d", unit, n.Name(), after, before+1)
	}
}

// awaitDown waits until one node of among goes down (its init is gone) and returns it.
func (s *scenario) awaitDown(among map[int]bool) int {
	s.t.Helper()
	down := -1
	s.waitFor("a node to go down", func() bool {
		for i := range among {
			if !procAlive(s.nodes[i].Init()) {
				down = i
				return true
			}
		}
		return false
	})
	return down
}

// bootAgain boots node i again on its disk and restarts its etcd member.
func (s *scenario) bootAgain(i int) {
	s.t.Helper()
	if err := s.nodes[i].Reboot(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.etcd.StartMember(s.ctx, i); err != nil {
		s.t.Fatal(err)
	}
}

// neverBack has node i reboot with --hold-after d and not come back: the slot frees d after
// the run ended, by etcd's clock; then the node is booted again for the next scenarios (also
// when a check fails). The run ends (its child, systemctl reboot, returns) seconds before the
// node is down, so the check is against the hold's lease as etcd saw it when the node was
// down: granted d, and the slot freed when what was left of it ran out, neither much earlier
// nor later. d must outlive the node's shutdown (7-8 s) for that to say anything.
func (s *scenario) neverBack(i int, d time.Duration) {
	s.t.Helper()
	n := s.nodes[i]
	s.installRolling(i, n, d.String())
	s.startUnit(n, "conch-rolling-reboot.service")
	s.awaitDown(map[int]bool{i: true})
	downAt := time.Now()
	defer s.bootAgain(i)
	granted, left, err := s.holdLease()
	if err != nil {
		s.t.Errorf("the hold's lease when %s was down: %v", n.Name(), err)
		return
	}
	s.waitFor("the slot of a node that never came back to free", func() bool { return s.keys() == 0 })
	freed := time.Since(downAt)
	s.t.Logf("scenario 13: %s never came back; its slot freed %v after it went down (--hold-after %v; the hold's lease granted %v, %v left at the time)",
		n.Name(), ms(freed), d, granted, left)
	if granted != d {
		s.t.Errorf("the hold's lease was granted %v, want --hold-after's %v", granted, d)
	}
	// etcd counts a TTL in whole seconds and looks for expired leases every 500 ms
	if freed < left-1500*time.Millisecond || freed > left+3*time.Second {
		s.t.Errorf("slot freed %v after the node went down, want about the %v its hold's lease had left", freed, left)
	}
}

// holdLease returns the TTL granted to the lease of the semaphore's one key, and what is left of
// it, as etcd says now; an error when there is not exactly one key or its lease is gone.
func (s *scenario) holdLease() (granted, left time.Duration, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, schema.Prefix(s.name, s.max), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		return 0, 0, fmt.Errorf("the held-after key: %v (%d keys)", err, len(resp.Kvs))
	}
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.TTL < 0 {
		return 0, 0, fmt.Errorf("the held-after key's lease %x: %v (TTL %d)", resp.Kvs[0].Lease, err, ttl.TTL)
	}
	return time.Duration(ttl.GrantedTTL) * time.Second, time.Duration(ttl.TTL) * time.Second, nil
}

// procAlive reports whether the host process pid exists (0: no).
func procAlive(pid int) bool {
	if pid == 0 {
		return false
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
