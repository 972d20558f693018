package systemd

import (
	"errors"
	"os"
	"testing"
)

// On this host PrimeMove either moves the test process into the cgroup it is already in (a
// cgroup2 host, as root) or refuses a hybrid or legacy host; in neither case does the process
// change cgroup or a file appear where the unified hierarchy's cgroup.procs would be. The
// cgroup2 path is tested inside a node too (unitrun's TestPrimeMoveInNode).
func TestPrimeMoveHere(t *testing.T) {
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat("/sys/fs/cgroup/cgroup.procs")
	err = PrimeMove()
	switch {
	case unifiedCgroups() && os.Geteuid() == 0 && err != nil:
		t.Errorf("PrimeMove as root on a cgroup2 host: %v", err)
	case !unifiedCgroups() && !errors.Is(err, errNotUnified):
		t.Errorf("PrimeMove on a host in hybrid or legacy mode: %v, want %v", err, errNotUnified)
	}
	after, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("PrimeMove moved the process:\n%s\nthen\n%s", before, after)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); (err == nil) != (statErr == nil) {
		t.Errorf("/sys/fs/cgroup/cgroup.procs: %v before PrimeMove, %v after", statErr, err)
	}
}
