package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The conch command lines of the contrib units for rolling reboots and HA timers run as
// written (their flags parse, their durations are conch's), against a real etcd, with the
// command replaced by true: the rolling reboot's run exits 0 and keeps the slot, the boot
// unit's --release frees it, the HA job runs once and is skipped the second time.
func TestContribFleetUnits(t *testing.T) {
	e := newEnv(t)
	line := regexp.MustCompile(`(?:ExecStart=|exec )/usr/bin/conch (sema [^'\n]*)`)
	var runs [][]string
	for _, unit := range []string{"conch-rolling-reboot.service", "conch-rolling-reboot-release.service", "conch-ha-job.service", "conch-ha-job.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		m := line.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s: no conch command line", unit)
		}
		args := strings.Fields(m[1])
		if i := strings.Index(m[1], " -- "); i >= 0 {
			args = append(strings.Fields(m[1][:i]), "--", "true")
		}
		runs = append(runs, args)
	}
	want := []string{"slot kept for 30m0s", "released the slot node", "", "skipped: this period's run is done"}
	for i, args := range runs {
		r := e.run(args...)
		if r.status != 0 || !strings.Contains(r.stderr, want[i]) {
			t.Errorf("%q: %v, want 0 and %q", args, r, want[i])
		}
	}
}
