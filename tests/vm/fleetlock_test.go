package vm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/sema/schema"
)

// Scenario 15: a FleetLock rolling reboot (D19) on the three nodes. `conch fleetlock` runs on
// mn1 from the contrib unit (conch-fleetlock.service, hardened, Type=notify), serving the
// group as the semaphore s15-fleetlock --max 1; on every node a client does what zincati does
// (testdata/fleetclient: steady-state at every start until a 2xx, then pre-reboot until a 2xx,
// then `systemctl reboot` for real) with an update staged, and maintenance jobs `conch sema
// s15-fleetlock --max 1` run on the other nodes. The reboots and the jobs are one queue:
// while a job runs every client is refused (423 naming the job's node); while a node
// reboots a job waits, and --nonblock exits 75 naming the rebooting id. The server's own node
// reboots too: its slot lives in etcd, the clients retry while it is down. Checked from the
// nodes' own stamps and etcd's history (check_test.go), each reboot a "child" of the
// semaphore from its grant to the steady-state that ended it: never two nodes down, never a
// job beside a reboot, every node rebooted exactly once.
func testFleetLockReboot(t *testing.T, c *cluster) {
	s := c.newScenario(t, "s15-fleetlock", 1)
	const server = 0 // mn1 serves; mn2 and mn3 run the jobs
	ids := make([]string, clusterSize)
	for i, n := range c.nodes {
		sum := sha256.Sum256([]byte("fleetlock " + n.Name())) // zincati: 32 hex digits from the machine id
		ids[i] = hex.EncodeToString(sum[:16])
	}
	t.Cleanup(s.removeFleetLock)
	s.installFleetLockServer(server)
	base := "http://" + c.nw.Addr(server) + ":8080/"
	for i := range c.nodes {
		style := "zincati"
		if i == 2 { // Flatcar's client on a base ending in "/": //v1/pre-reboot
			style = "flatcar"
		}
		s.installFleetClient(i, base, ids[i], style)
	}
	began := monoNow()

	// A maintenance job holds the group before any node asks: every client is refused.
	gate := "s15-job1-go"
	job1 := s.job(1, nil, "-until", filepath.Join(histMount, gate))
	s.waitChildren(1)
	for i := range c.nodes {
		s.startUnit(c.nodes[i], "fleetclient.service")
	}
	s.waitFor("every client to be refused while the job runs", func() bool {
		for i := range c.nodes {
			if slices.ContainsFunc(s.fleetEvents(i), func(e fleetEvent) bool { return e.Ev == "pre-reboot" && e.Status/100 == 2 }) {
				t.Fatalf("%s was granted a reboot while a job of the group runs", c.nodes[i].Name())
			}
			if !slices.ContainsFunc(s.fleetEvents(i), func(e fleetEvent) bool {
				return e.Ev == "pre-reboot" && e.Status == 423 && e.Kind == "failed_lock_semaphore_full" &&
					strings.Contains(e.Value, c.nodes[1].Name()) && strings.Contains(e.Value, "a running job")
			}) {
				return false
			}
		}
		return true
	})
	if err := os.WriteFile(filepath.Join(c.hist, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wantExit(job1, "the first maintenance job", 0)

	type slot struct {
		node       int
		down, back int64 // as the host saw them: init gone, booted again
		released   int64 // etcd deleted its key, as the host's watch saw it
		key        holder
	}
	var slots []slot
	var job2 *systemdtest.Proc
	pending := map[int]bool{0: true, 1: true, 2: true}
	for round := 0; len(pending) > 0; round++ {
		down := s.awaitDown(pending)
		sl := slot{node: down, down: monoNow()}
		for i := range pending {
			if i != down && !procAlive(c.nodes[i].Init()) {
				t.Fatalf("round %d: %s is down too while %s is down", round, c.nodes[i].Name(), c.nodes[down].Name())
			}
		}
		hs := s.holders()
		if len(hs) != 1 || hs[0].rec.Host != ids[down] || hs[0].rec.Via != schema.ViaFleetLock || hs[0].rec.State != schema.StateHeldAfter {
			t.Fatalf("round %d: %s is down; keys %+v, want its reboot slot only (id %s, via fleetlock, held after)", round, c.nodes[down].Name(), hs, ids[down])
		}
		sl.key = hs[0]
		if round == 0 { // a job asked while a node reboots waits; --nonblock says who reboots
			other := 1
			if down == 1 {
				other = 2
			}
			nb := s.conch(other, "sema", s.name, "--max", "1", "--nonblock", "--", histchild, "-dir", histMount)
			if code, stderr := s.exit(nb); code != 75 || !strings.Contains(stderr, ids[down]) {
				t.Errorf("--nonblock on %s while %s reboots: exit %d %q, want 75 naming id %s", c.nodes[other].Name(), c.nodes[down].Name(), code, stderr, ids[down])
			}
			job2 = s.job(other, []string{"--wait", "2m"}, "-hold", "1s")
			s.waitFor("the second job to queue", func() bool { return s.keys() == 2 })
		}
		s.bootAgain(down)
		sl.back = monoNow()
		s.waitFor("the rebooted node's steady-state to free its slot", func() bool {
			sl.released = s.deletedAt(sl.key.key)
			return sl.released != 0
		})
		slots = append(slots, sl)
		delete(pending, down)
	}
	s.wantExit(job2, "the second maintenance job", 0)

	// Each reboot is a child of the semaphore from its grant to the steady-state request
	// that ended it; each node rebooted exactly once, its down time inside that span.
	var reboots []childRec
	for _, sl := range slots {
		n := c.nodes[sl.node]
		evs := s.fleetEvents(sl.node)
		boots := filterEvents(evs, func(e fleetEvent) bool { return e.Ev == "boot" })
		granted := filterEvents(evs, func(e fleetEvent) bool { return e.Ev == "pre-reboot" && e.Status/100 == 2 })
		rebooted := filterEvents(evs, func(e fleetEvent) bool { return e.Ev == "reboot" })
		if len(boots) != 2 || len(granted) != 1 || len(rebooted) != 1 {
			t.Errorf("%s: %d starts, %d grants, %d reboots of its client, want 2, 1 and 1", n.Name(), len(boots), len(granted), len(rebooted))
			continue
		}
		steady := filterEvents(evs, func(e fleetEvent) bool { return e.Ev == "steady" && e.Status/100 == 2 && e.Mono > boots[1].Mono })
		if len(steady) != 1 {
			t.Errorf("%s: %d steady-state grants after its reboot, want 1", n.Name(), len(steady))
			continue
		}
		g, b, st := granted[0].Mono, boots[1].Mono, steady[0]
		// The client starts during the boot, before the host's boot returns (back).
		if !(g <= rebooted[0].Mono && rebooted[0].Mono <= sl.down && sl.down <= b && b <= st.Sent && st.Sent <= sl.released) {
			t.Errorf("%s: out of order: granted +%v, reboot +%v, down +%v, client started +%v, steady-state sent +%v, key deleted +%v", n.Name(),
				ms(time.Duration(g-began)), ms(time.Duration(rebooted[0].Mono-began)), ms(time.Duration(sl.down-began)),
				ms(time.Duration(b-began)), ms(time.Duration(st.Sent-began)), ms(time.Duration(sl.released-began)))
		}
		refused := len(filterEvents(evs, func(e fleetEvent) bool { return e.Ev == "pre-reboot" && e.Status/100 != 2 }))
		t.Logf("scenario 15: %s (id %s…, %s client): granted +%v after %d refusals; down %v after the grant; its client started %v and the host's boot returned %v after it went down; steady-state sent %v after the client started; key deleted %v after that (+%v); %v from grant to release",
			n.Name(), ids[sl.node][:8], map[bool]string{true: "flatcar", false: "zincati"}[sl.node == 2], ms(time.Duration(g-began)), refused,
			ms(time.Duration(sl.down-g)), ms(time.Duration(b-sl.down)), ms(time.Duration(sl.back-sl.down)), ms(time.Duration(st.Sent-b)),
			ms(time.Duration(sl.released-st.Sent)), ms(time.Duration(sl.released-began)), ms(time.Duration(sl.released-g)))
		reboots = append(reboots, childRec{ID: "reboot-" + n.Name(), Node: n.Name(), Sema: s.name, Max: "1",
			Rev: fmt.Sprint(sl.key.rev), Lease: fmt.Sprintf("%x", sl.key.lease), Start: g, End: st.Sent, How: "reboot"})
	}
	for k := 1; k < len(slots); k++ {
		if slots[k].down < slots[k-1].released {
			t.Errorf("%s went down before %s's slot was freed", c.nodes[slots[k].node].Name(), c.nodes[slots[k-1].node].Name())
		}
	}
	r := s.verifyWith(checkSpec{Handoff: handoff}, reboots)
	if r.Children != 2+clusterSize || r.MaxConcurrent != 1 {
		t.Errorf("%d children (jobs and reboots), at most %d at once; want 5, and 1", r.Children, r.MaxConcurrent)
	}
}

// installFleetLockServer installs the contrib conch-fleetlock.service on node i with its
// hardening unchanged, serving the scenario's semaphore as a group (hold 2 minutes: a node
// that never reports back frees its slot before the scenario's time is up), with the node's
// member first in CONCH_ENDPOINTS, enables it (it starts again at each boot) and starts it
// (Type=notify: `systemctl start` returns once it listens and etcd answered).
func (s *scenario) installFleetLockServer(i int) {
	s.t.Helper()
	n := s.nodes[i]
	unit := replaceLine(s.t, contribUnit(s.t, "conch-fleetlock.service"), "ExecStart=",
		fmt.Sprintf("ExecStart=/usr/bin/conch fleetlock --listen :8080 --group %s=%d --hold 2m", s.name, s.max))
	env := "[Service]\nEnvironment=CONCH_ENDPOINTS=" + strings.Join(s.etcd.Endpoints(i), ",") + "\n"
	for path, data := range map[string]string{
		"/etc/systemd/system/conch-fleetlock.service":                  unit,
		"/etc/systemd/system/conch-fleetlock.service.d/endpoints.conf": env,
	} {
		if err := n.WriteFile(s.ctx, path, []byte(data), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	s.nsenter(n, "ln", "-sf", conch, "/usr/bin/conch")
	s.nsenter(n, "systemctl", "daemon-reload")
	s.nsenter(n, "systemctl", "enable", "--now", "conch-fleetlock.service")
}

// installFleetClient installs testdata/fleetclient on node i as fleetclient.service, enabled
// (it runs at every boot, as zincati does) but not started, with an update staged.
func (s *scenario) installFleetClient(i int, base, id, style string) {
	s.t.Helper()
	n := s.nodes[i]
	unit := fmt.Sprintf(`[Unit]
Description=a FleetLock client that behaves as zincati does
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=%s/fleetclient -base %s -style %s -id %s -group %s -dir %s -staged /var/lib/fleetclient/staged -every 250ms

[Install]
WantedBy=multi-user.target
`, systemdtest.BinMount, base, style, id, s.name, histMount)
	if err := n.WriteFile(s.ctx, "/etc/systemd/system/fleetclient.service", []byte(unit), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := n.WriteFile(s.ctx, "/var/lib/fleetclient/staged", nil, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.nsenter(n, "systemctl", "daemon-reload")
	s.nsenter(n, "systemctl", "enable", "fleetclient.service")
}

// removeFleetLock leaves the nodes as the scenario found them, also when it failed: each node
// running (booted again if it went down), no FleetLock server or client enabled, no update
// staged (a client left behind would reboot its node in a later scenario). A client stopped
// after its last event was "reboot" has asked systemd for a reboot: its node is let go down
// first (a node shutting down refuses units, so heal could not start its etcd member).
func (s *scenario) removeFleetLock() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, n := range s.nodes {
		if procAlive(n.Init()) {
			_, _ = n.Systemctl(ctx, "stop", "fleetclient.service")
			if evs := s.fleetEvents(i); len(evs) > 0 && evs[len(evs)-1].Ev == "reboot" {
				if err := systemdtest.WaitFor(ctx, n.Name()+" to go down", func() (bool, error) { return !procAlive(n.Init()), nil }); err != nil {
					s.t.Error(err)
				}
			}
		}
		if !procAlive(n.Init()) {
			if err := n.Reboot(); err != nil {
				s.t.Errorf("cannot boot %s again: %v", n.Name(), err)
				continue
			}
			if err := s.etcd.StartMember(ctx, i); err != nil {
				s.t.Error(err)
			}
		}
		if res, err := n.Nsenter(ctx, "sh", "-c", "rm -f /var/lib/fleetclient/staged; for u in fleetclient conch-fleetlock; do "+
			"if [ -e /etc/systemd/system/$u.service ]; then systemctl disable --now $u.service || exit 1; fi; done"); err != nil {
			s.t.Errorf("cannot remove the FleetLock units of %s: %v %s", n.Name(), err, res.Stderr)
		}
	}
}

// nsenter runs argv in node n outside any unit and fails the test if it fails.
func (s *scenario) nsenter(n *systemdtest.Node, argv ...string) {
	s.t.Helper()
	if res, err := n.Nsenter(s.ctx, argv...); err != nil {
		s.t.Fatalf("%s on %s: %v %s", argv, n.Name(), err, res.Stderr)
	}
}

// fleetEvent is one line of a fleetclient's log (testdata/fleetclient).
type fleetEvent struct {
	Ev     string `json:"ev"`
	Node   string `json:"node"`
	ID     string `json:"id"`
	Mono   int64  `json:"mono_ns"`
	Sent   int64  `json:"sent_ns"`
	Status int    `json:"status"`
	Kind   string `json:"kind"`
	Value  string `json:"value"`
}

// fleetEvents returns node i's client log so far, in order (a line being written is skipped).
func (s *scenario) fleetEvents(i int) []fleetEvent {
	f, err := os.Open(filepath.Join(s.hist, fmt.Sprintf("fleet-%s-%s.log", s.name, s.nodes[i].Name())))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []fleetEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e fleetEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

func filterEvents(evs []fleetEvent, keep func(fleetEvent) bool) []fleetEvent {
	var out []fleetEvent
	for _, e := range evs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// holders returns the scenario's keys as etcd has them now, oldest first.
func (s *scenario) holders() []holder {
	s.t.Helper()
	resp, err := s.cli.Get(s.ctx, schema.Prefix(s.name, s.max), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		s.t.Fatal(err)
	}
	var out []holder
	for _, kv := range resp.Kvs {
		out = append(out, holder{key: string(kv.Key), rev: kv.CreateRevision, lease: kv.Lease, rec: schema.DecodeRecord(kv.Value).Record})
	}
	return out
}

// deletedAt returns when the host's watch saw etcd delete key (CLOCK_MONOTONIC ns), 0 if not yet.
func (s *scenario) deletedAt(key string) int64 {
	for _, e := range s.obs.history(key) {
		if e.Key == key && !e.Put {
			return e.Mono
		}
	}
	return 0
}
