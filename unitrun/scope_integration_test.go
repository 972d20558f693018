package unitrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/unitrun"
)

// Integration tests of the scope primitives against a real systemd 252 inside a node
// (internal/systemdtest). The scopes are created by testdata/scopehelper running inside the
// node as a transient service, because a scope only takes PIDs of the manager's own PID
// namespace; the assertions read the node's bus from here.

// scopeTestTimeout bounds one test; a healthy run needs a few seconds.
const scopeTestTimeout = 2 * time.Minute

// helperEvent mirrors testdata/scopehelper's output.
type helperEvent struct {
	Result      *unitrun.Result `json:"result"`
	RunError    string          `json:"run_error"`
	ScopeFailed bool            `json:"scope_failed"`

	Scope       string `json:"scope"`
	Child       int    `json:"child"`
	Service     string `json:"service"`
	Slice       string `json:"slice"`
	StartMillis int64  `json:"start_ms"`
	ChildExit   string `json:"child_exit"`
	Available   string `json:"available"`
	Twice       string `json:"twice"`
	TwiceExists bool   `json:"twice_exists"`
	Error       string `json:"error"`
	Prime       string `json:"prime"`
	CgroupFrom  string `json:"cgroup_from"`
	CgroupTo    string `json:"cgroup_to"`
}

// scopeNode boots a node with scopehelper at /opt/bin and returns it with a context bounded by
// scopeTestTimeout and a connection to the node's system bus.
func scopeNode(t *testing.T) (*systemdtest.Node, context.Context, *sdbus.Conn) {
	t.Helper()
	bins := systemdtest.BuildBinaries(t, "./unitrun/testdata/scopehelper")
	n := systemdtest.Boot(t, systemdtest.Options{BinDir: bins})
	ctx, cancel := context.WithTimeout(t.Context(), scopeTestTimeout)
	t.Cleanup(cancel)
	conn, err := n.DialBus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return n, ctx, conn
}

// events parses the helper's JSON lines printed so far.
func events(out []byte) []helperEvent {
	var evs []helperEvent
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var ev helperEvent
		if json.Unmarshal(line, &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

// awaitEvent waits until the helper printed an event for which match is true and returns it;
// it fails the test if the helper reports an error or ends first.
func awaitEvent(t *testing.T, ctx context.Context, p *systemdtest.Proc, what string, match func(helperEvent) bool) helperEvent {
	t.Helper()
	var found helperEvent
	err := systemdtest.WaitFor(ctx, what, func() (bool, error) {
		ended := false
		select {
		case <-p.Done():
			ended = true
		default:
		}
		for _, ev := range events(p.Stdout()) {
			if ev.Error != "" {
				return false, fmt.Errorf("helper: %s", ev.Error)
			}
			if match(ev) {
				found = ev
				return true, nil
			}
		}
		if ended {
			return false, fmt.Errorf("helper ended: stdout %q, stderr %q", p.Stdout(), p.Stderr())
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// procGone waits until PID pid no longer exists in the node.
func procGone(t *testing.T, ctx context.Context, n *systemdtest.Node, pid int) {
	t.Helper()
	err := systemdtest.WaitFor(ctx, fmt.Sprintf("process %d to end in the node", pid), func() (bool, error) {
		_, err := n.Nsenter(ctx, "test", "-e", fmt.Sprintf("/proc/%d", pid))
		return err != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// noScopeLeft fails the test if a conch scope is still loaded in the node.
func noScopeLeft(t *testing.T, ctx context.Context, conn *sdbus.Conn) {
	t.Helper()
	units, err := conn.ListUnitsByPatternsContext(ctx, nil, []string{"conch-sema-*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		t.Errorf("scope %s lingers: %s/%s", u.Name, u.ActiveState, u.SubState)
	}
}

func TestScopeStartStopInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	n, ctx, conn := scopeNode(t)
	scope := systemd.ScopeName("video-encode", 8812)
	const killAfter = time.Second
	p, err := n.StartWith(ctx, systemdtest.RunOptions{
		Unit:       "scope-helper.service",
		Properties: []string{"MemoryHigh=200M", "CPUWeight=50"}, // inherited by the scope (D8)
	}, systemdtest.BinMount+"/scopehelper", "scope", "-name", scope, "-kill-after", killAfter.String(), "-bind",
		"-p", "MemoryMax=300M", "-p", "KillSignal=SIGINT", "-p", "CPUWeight=70")
	if err != nil {
		t.Fatal(err)
	}
	ev := awaitEvent(t, ctx, p, "the scope to start", func(ev helperEvent) bool { return ev.Scope != "" })
	t.Logf("StartScope took %d ms inside the node", ev.StartMillis)
	if ev.Service != "scope-helper.service" || ev.Slice != "system.slice" {
		t.Errorf("helper placed itself in service %q, slice %q; want scope-helper.service, system.slice", ev.Service, ev.Slice)
	}

	// What systemctl show reports for the scope.
	props, err := conn.GetUnitTypePropertiesContext(ctx, scope, "Scope")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]any{
		"TimeoutStopUSec": uint64(killAfter.Microseconds()),
		"KillMode":        "control-group",
		"SendSIGKILL":     true,
		"KillSignal":      int32(2),          // -p KillSignal=SIGINT
		"MemoryMax":       uint64(300 << 20), // -p MemoryMax=300M
		"MemoryHigh":      uint64(200 << 20), // inherited from the service
		"CPUWeight":       uint64(70),        // -p overrides the inherited 50
		"Slice":           "system.slice",    // the service's slice
		"ControlGroup":    "/system.slice/" + scope,
	} {
		if got := props[name]; got != want {
			t.Errorf("scope %s: %s = %v (%T), want %v (%T)", scope, name, got, got, want, want)
		}
	}
	unitProps, err := conn.GetUnitPropertiesContext(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if unitProps["CollectMode"] != "inactive-or-failed" || unitProps["ActiveState"] != "active" ||
		unitProps["Description"] != "conch scope test "+scope {
		t.Errorf("scope %s: CollectMode %v, ActiveState %v, Description %v", scope,
			unitProps["CollectMode"], unitProps["ActiveState"], unitProps["Description"])
	}
	if list, _ := unitProps["BindsTo"].([]string); !slices.Contains(list, "scope-helper.service") {
		t.Errorf("scope %s: BindsTo = %v, want it to hold scope-helper.service", scope, unitProps["BindsTo"])
	}
	// no After= on the service: it would deadlock with a service still starting
	if list, _ := unitProps["After"].([]string); slices.Contains(list, "scope-helper.service") {
		t.Errorf("scope %s: After = %v, must not order after scope-helper.service", scope, unitProps["After"])
	}

	// The child is in the scope's cgroup.
	cg, err := n.ReadFile(ctx, fmt.Sprintf("/proc/%d/cgroup", ev.Child))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cg), "0::/system.slice/"+scope+"\n") {
		t.Errorf("child %d is in cgroup %q, want /system.slice/%s", ev.Child, cg, scope)
	}

	// StopScope: the child ignores SIGINT (the stop signal here), so only the SIGKILL after
	// KillAfter ends it; then the scope is gone.
	began := time.Now()
	if err := systemd.StopScope(ctx, conn, scope); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("StopScope of a scope ignoring its stop signal took %v (KillAfter %v)", took, killAfter)
	if took < killAfter-100*time.Millisecond || took > killAfter+5*time.Second {
		t.Errorf("StopScope took %v, want about KillAfter = %v", took, killAfter)
	}
	procGone(t, ctx, n, ev.Child)
	exit := awaitEvent(t, ctx, p, "the helper to see its child end", func(ev helperEvent) bool { return ev.ChildExit != "" })
	if exit.ChildExit != "signal: killed" {
		t.Errorf("child ended with %q, want signal: killed (SIGKILL after KillAfter)", exit.ChildExit)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Errorf("helper: %v", err)
	}
	noScopeLeft(t, ctx, conn)

	// Stopping a scope that is gone is not an error.
	if err := systemd.StopScope(ctx, conn, scope); err != nil {
		t.Errorf("StopScope of a gone scope: %v", err)
	}
}

func TestScopeBoundToServiceStopsWithIt(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	n, ctx, conn := scopeNode(t)
	scope := systemd.ScopeName("bound", 7)
	p, err := n.StartWith(ctx, systemdtest.RunOptions{Unit: "bound-helper.service"},
		systemdtest.BinMount+"/scopehelper", "scope", "-name", scope, "-kill-after", "500ms", "-bind", "-twice")
	if err != nil {
		t.Fatal(err)
	}
	ev := awaitEvent(t, ctx, p, "the scope to start", func(ev helperEvent) bool { return ev.Scope != "" })

	// A second scope of the same name is refused with ErrUnitExists.
	tw := awaitEvent(t, ctx, p, "the second StartScope", func(ev helperEvent) bool { return ev.Twice != "" })
	if !tw.TwiceExists || !strings.Contains(tw.Twice, scope) {
		t.Errorf("second StartScope of %s: %q, want ErrUnitExists naming the unit", scope, tw.Twice)
	}

	// Stopping the service stops the scope it is bound to (D8), child included.
	if _, err := n.Systemctl(ctx, "stop", "bound-helper.service"); err != nil {
		t.Fatal(err)
	}
	procGone(t, ctx, n, ev.Child)
	err = systemdtest.WaitFor(ctx, scope+" to be gone", func() (bool, error) {
		units, err := conn.ListUnitsByNamesContext(ctx, []string{scope})
		return err == nil && (len(units) == 0 || units[0].LoadState == "not-found"), err
	})
	if err != nil {
		t.Fatal(err)
	}
	noScopeLeft(t, ctx, conn)
}

func TestAvailableInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	n, ctx, _ := scopeNode(t)
	res, err := n.Run(ctx, systemdtest.BinMount+"/scopehelper", "available")
	if err != nil {
		t.Fatal(err)
	}
	if evs := events(res.Stdout); len(evs) != 1 || evs[0].Available != "yes" {
		t.Errorf("Available() inside a node: %s", res.Stdout)
	}
}

// PrimeMove, as a scope-mode run calls it at its start (D8d), works on the node's pure cgroup2
// tree as root and moves the caller nowhere: its cgroup after the call is the one before it,
// its transient service's. In a cgroup namespace of its own, over the node's /sys/fs/cgroup
// mounted outside it, our cgroup's path names another cgroup there (the node's root): it
// refuses, and the caller stays in its service.
func TestPrimeMoveInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	n, ctx, _ := scopeNode(t)
	for _, tc := range []struct {
		name    string
		argv    []string
		refusal string // "" for success, else a part of the error
	}{
		{"service", []string{systemdtest.BinMount + "/scopehelper", "prime"}, ""},
		{"cgroup namespace", []string{"unshare", "--cgroup", systemdtest.BinMount + "/scopehelper", "prime"}, "another cgroup"},
	} {
		res, err := n.Run(ctx, tc.argv...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, res.Stderr)
		}
		evs := events(res.Stdout)
		if len(evs) != 1 {
			t.Fatalf("%s: scopehelper prime: %s", tc.name, res.Stdout)
		}
		ev := evs[0]
		switch {
		case tc.refusal == "" && ev.Prime != "ok":
			t.Errorf("%s: PrimeMove: %s", tc.name, ev.Prime)
		case tc.refusal != "" && !strings.Contains(ev.Prime, tc.refusal):
			t.Errorf("%s: PrimeMove: %q, want a refusal naming %q", tc.name, ev.Prime, tc.refusal)
		}
		if ev.CgroupFrom == "" || ev.CgroupTo != ev.CgroupFrom {
			t.Errorf("%s: PrimeMove moved the caller: cgroup %q before, %q after", tc.name, ev.CgroupFrom, ev.CgroupTo)
		}
	}
}

// As a non-root user, scope mode talks to the user's own manager (D8), like systemd-run --user.
func TestScopeUserManagerInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	n, ctx, _ := scopeNode(t)
	const uid = "1000" // the user tests/vm/mkrootfs.sh creates
	if _, err := n.Systemctl(ctx, "start", "user@"+uid+".service"); err != nil {
		t.Fatal(err)
	}
	scope := systemd.ScopeName("as-user", 3)
	p, err := n.StartWith(ctx, systemdtest.RunOptions{
		Properties: []string{"User=" + uid},
		Env:        []string{"XDG_RUNTIME_DIR=/run/user/" + uid},
	}, systemdtest.BinMount+"/scopehelper", "scope", "-name", scope, "-kill-after", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	ev := awaitEvent(t, ctx, p, "the user scope to start", func(ev helperEvent) bool { return ev.Scope != "" })
	cg, err := n.ReadFile(ctx, fmt.Sprintf("/proc/%d/cgroup", ev.Child))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cg), "/user@"+uid+".service/") || !strings.HasSuffix(strings.TrimSpace(string(cg)), "/"+scope) {
		t.Errorf("child %d of the user's scope is in cgroup %q, want a %s below user@%s.service", ev.Child, cg, scope, uid)
	}
	res, err := n.Nsenter(ctx, "runuser", "-u", "conch", "--", "env", "XDG_RUNTIME_DIR=/run/user/"+uid,
		"systemctl", "--user", "stop", scope)
	if err != nil {
		t.Fatalf("systemctl --user stop %s: %v %s", scope, err, res.Stderr)
	}
	procGone(t, ctx, n, ev.Child)
}

// Run in scope mode (D8), at the package's level: the command runs inside the scope and its
// status comes back; a scope systemd stops on its own gives ScopeStopped; RuntimeMax stops the
// command through the scope (RuntimeExceeded); a scope that cannot be created gives
// ErrScopeFailed without running the command, and Run leaves the unit holding the name alone.
func TestRunScopeModeInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	n, ctx, conn := scopeNode(t)
	helper := systemdtest.BinMount + "/scopehelper"
	result := func(p *systemdtest.Proc) helperEvent {
		t.Helper()
		return awaitEvent(t, ctx, p, "Run's result", func(ev helperEvent) bool { return ev.Result != nil })
	}

	// Exit status, and the command's own cgroup is the scope's.
	scope := systemd.ScopeName("run-mode", 1)
	p, err := n.Start(ctx, helper, "run", "-name", scope, "--", "/bin/sh", "-c", "grep ^0:: /proc/self/cgroup; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	ev := result(p)
	if want := (unitrun.Result{Started: true, ExitStatus: 3}); *ev.Result != want || ev.RunError != "" {
		t.Errorf("Run = %+v, %q; want %+v", *ev.Result, ev.RunError, want)
	}
	if out := string(p.Stdout()); !strings.Contains(out, "0::/system.slice/"+scope+"\n") {
		t.Errorf("the command saw its cgroup as %q, want %s", out, scope)
	}

	// systemd stops the scope on its own: the command's status, ScopeStopped.
	scope = systemd.ScopeName("run-mode", 2)
	p, err = n.Start(ctx, helper, "run", "-name", scope, "--", "/bin/sh", "-c", "echo started; exec sleep 100")
	if err != nil {
		t.Fatal(err)
	}
	err = systemdtest.WaitFor(ctx, "the command to start", func() (bool, error) {
		return strings.Contains(string(p.Stdout()), "started"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Systemctl(ctx, "stop", scope); err != nil {
		t.Fatal(err)
	}
	ev = result(p)
	if want := (unitrun.Result{Started: true, ExitStatus: 143, Signal: 15, ScopeStopped: true}); *ev.Result != want || ev.RunError != "" {
		t.Errorf("Run after systemctl stop = %+v, %q; want %+v", *ev.Result, ev.RunError, want)
	}

	// RuntimeMax through the scope.
	scope = systemd.ScopeName("run-mode", 3)
	began := time.Now()
	p, err = n.Start(ctx, helper, "run", "-name", scope, "-runtime-max", "1s", "--", "sleep", "100")
	if err != nil {
		t.Fatal(err)
	}
	ev = result(p)
	if took := time.Since(began); !ev.Result.RuntimeExceeded || ev.Result.ExitStatus != 143 || took < time.Second {
		t.Errorf("Run with RuntimeMax 1s = %+v, %q after %v; want RuntimeExceeded, status 143", *ev.Result, ev.RunError, took)
	}

	// A unit already holds the name: ErrScopeFailed, nothing run, that unit untouched.
	scope = systemd.ScopeName("run-mode", 4)
	if _, err := n.Nsenter(ctx, "/bin/sh", "-c", "setsid systemd-run --scope --quiet --unit='"+scope+"' sleep 100 </dev/null >/dev/null 2>&1 &"); err != nil {
		t.Fatal(err)
	}
	err = systemdtest.WaitFor(ctx, "the squatting scope", func() (bool, error) {
		units, err := conn.ListUnitsByNamesContext(ctx, []string{scope})
		return err == nil && len(units) == 1 && units[0].ActiveState == "active", err
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err = n.Start(ctx, helper, "run", "-name", scope, "--", "/bin/sh", "-c", "echo ran")
	if err != nil {
		t.Fatal(err)
	}
	ev = result(p)
	if !ev.ScopeFailed || ev.Result.Started || strings.Contains(string(p.Stdout()), "ran") {
		t.Errorf("Run with the scope's name taken = %+v, %q; want ErrScopeFailed and nothing run", *ev.Result, ev.RunError)
	}
	units, err := conn.ListUnitsByNamesContext(ctx, []string{scope})
	if err != nil || len(units) != 1 || units[0].ActiveState != "active" {
		t.Errorf("the unit that held %s: %+v, %v; want it still active", scope, units, err)
	}
	if _, err := n.Systemctl(ctx, "stop", scope); err != nil {
		t.Fatal(err)
	}
	err = systemdtest.WaitFor(ctx, "no conch scope left", func() (bool, error) {
		units, err := conn.ListUnitsByPatternsContext(ctx, nil, []string{"conch-sema-*"})
		return err == nil && len(units) == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
}
