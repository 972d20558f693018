package systemd

import (
	"errors"
	"os"
	"testing"
)

func TestParsePlacement(t *testing.T) {
	const hybrid = `12:pids:/system.slice/job.service
9:name=systemd:/system.slice/job.service
0::/system.slice/job.service
`
	for _, tc := range []struct {
		name   string
		file   string
		v1     bool // hybrid or legacy host: name=systemd is systemd's hierarchy
		user   bool
		want   Placement
		svcErr bool
	}{
		{"v2 service", "0::/system.slice/conch-job.service\n", false, false,
			Placement{"/system.slice/conch-job.service", "conch-job.service", "system.slice"}, false},
		{"hybrid", hybrid, true, false,
			Placement{"/system.slice/job.service", "job.service", "system.slice"}, false},
		{"hybrid: name=systemd wins", "1:name=systemd:/system.slice/a.service\n0::/\n", true, false,
			Placement{"/system.slice/a.service", "a.service", "system.slice"}, false},
		{"legacy", "1:name=systemd:/system.slice/a.service\n", true, false,
			Placement{"/system.slice/a.service", "a.service", "system.slice"}, false},
		{"unified node on a hybrid kernel: 0:: wins", "9:name=systemd:/\n4:memory:/\n0::/system.slice/b.service\n", false, false,
			Placement{"/system.slice/b.service", "b.service", "system.slice"}, false},
		{"nested slice", "0::/system.slice/system-getty.slice/getty@tty1.service\n", false, false,
			Placement{"/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service", "system-getty.slice"}, false},
		{"delegated sub-cgroup", "0::/system.slice/runner.service/payload/inner\n", false, false,
			Placement{"/system.slice/runner.service/payload/inner", "runner.service", "system.slice"}, false},
		{"escaped name", "0::/system.slice/_cpu.service\n", false, false,
			Placement{"/system.slice/_cpu.service", "cpu.service", "system.slice"}, false},
		{"login session", "0::/user.slice/user-1000.slice/session-3.scope\n", false, false,
			Placement{"/user.slice/user-1000.slice/session-3.scope", "session-3.scope", "user-1000.slice"}, true},
		{"root", "0::/\n", false, false, Placement{"/", "", "-.slice"}, true},
		{"init scope", "0::/init.scope\n", false, false, Placement{"/init.scope", "init.scope", "-.slice"}, true},
		{"user manager seen by the system", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job.service\n", false, false,
			Placement{"/user.slice/user-1000.slice/user@1000.service/app.slice/job.service", "user@1000.service", "user-1000.slice"}, false},
		{"user unit", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job.service\n", false, true,
			Placement{"/user.slice/user-1000.slice/user@1000.service/app.slice/job.service", "job.service", "app.slice"}, false},
		{"user unit in the manager's root", "0::/user.slice/user-1000.slice/user@1000.service/job.service\n", false, true,
			Placement{"/user.slice/user-1000.slice/user@1000.service/job.service", "job.service", "-.slice"}, false},
		{"user: not under a user manager", "0::/user.slice/user-1000.slice/session-3.scope\n", false, true,
			Placement{"/user.slice/user-1000.slice/session-3.scope", "", ""}, true},
	} {
		got, err := parsePlacement([]byte(tc.file), !tc.v1, tc.user)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: parsePlacement = %+v, want %+v", tc.name, got, tc.want)
		}
		svc, err := got.Service()
		if tc.svcErr != (err != nil) || (err != nil && !errors.Is(err, ErrNotInService)) {
			t.Errorf("%s: Service() = %q, %v; want error %v (ErrNotInService)", tc.name, svc, err, tc.svcErr)
		}
	}
	if _, err := parsePlacement([]byte("4:memory:/x\n"), true, false); err == nil {
		t.Error("parsePlacement without a systemd hierarchy succeeded")
	}
}

func TestReadPlacementSelf(t *testing.T) {
	want, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	got, err := ReadPlacement(0, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := parsePlacement(want, unifiedCgroups(), false)
	if got != p {
		t.Errorf("ReadPlacement(0) = %+v, want %+v from /proc/self/cgroup", got, p)
	}
	if _, err := ReadPlacement(os.Getpid(), false); err != nil {
		t.Errorf("ReadPlacement(own PID): %v", err)
	}
}
