package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
)

// Scope flags on this host, where PID 1 is not systemd (D3, D8). The same flags inside a real
// systemd are tested in tests/vm.

// requireNoSystemd stops the test if this host runs systemd: these tests are about its
// absence (skipped outside CI, failed in CI, whose machines have no systemd as PID 1).
func requireNoSystemd(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		ci.Unavailable(t, "this host runs systemd (/run/systemd/system exists): the outside-systemd tests need a host without it; tests/vm covers scope mode")
	}
}

// D8: -p and --slice are checked against the table of scope-legal properties before any etcd
// call; anything refused exits 64 and writes nothing.
func TestScopeFlagsRefusedBeforeEtcd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rev := e.srv.Revision()
	for _, args := range [][]string{
		{"-p", "Bogus=1"},
		{"-p", "Restart=always"},        // a service's setting, not a scope's
		{"-p", "KillMode=process"},      // would let the child's processes outlive the slot
		{"-p", "MemoryMax=lots"},        // bad value
		{"-p", "RuntimeMaxSec"},         // no value
		{"-p", "memorymax=1G"},          // case matters, as in systemd
		{"--property", "Slice=x.slice"}, // --slice's job
		{"--slice", "bad slice"},        // not a unit name
		{"--scope", "never", "-p", "MemoryMax=1G"},
		{"--scope", "never", "--slice", "batch"},
	} {
		argv := append([]string{"sema", "sc", "--max", "1"}, args...)
		argv = append(argv, "--", "true")
		r := e.run(argv...)
		if r.status != exitUsage || !strings.Contains(r.stderr, "conch: ") {
			t.Errorf("conch %q: %v, want 64 with a reason", argv, r)
		}
	}
	if got := e.srv.Revision(); got != rev {
		t.Fatalf("refused scope flags wrote to etcd: revision %d -> %d", rev, got)
	}
}

// D3, D8: --scope=always, and -p/--slice which imply it, exit 69 without systemd, with one line
// naming the semaphore, before taking a slot; --scope=auto (the default) runs the child in
// direct mode; --scope=never too.
func TestScopeOutsideSystemd(t *testing.T) {
	t.Parallel()
	requireNoSystemd(t)
	e := newEnv(t)
	ran := e.path("ran")
	for _, args := range [][]string{
		{"--scope", "always"},
		{"--scope=always"},
		{"-p", "MemoryMax=300M"},
		{"--slice", "batch"},
		{"--scope", "auto", "-p", "KillSignal=SIGINT"},
	} {
		rev := e.srv.Revision()
		argv := append([]string{"sema", "sc-always", "--max", "1"}, args...)
		argv = append(argv, "--", "touch", ran)
		r := e.run(argv...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.status != exitUnavailable || len(lines) != 1 || !strings.Contains(lines[0], "sc-always[") ||
			!strings.Contains(lines[0], "scope") {
			t.Errorf("conch %q: %v, want 69 and one line naming sc-always and the scope", argv, r)
		}
		if got := e.srv.Revision(); got != rev {
			t.Errorf("conch %q took a slot it could not use: revision %d -> %d", argv, rev, got)
		}
	}
	if exists(ran) {
		t.Fatal("the child ran although the scope was required")
	}

	for _, args := range [][]string{nil, {"--scope", "auto"}, {"--scope=never"}} {
		argv := append([]string{"sema", "sc-auto", "--max", "1"}, args...)
		argv = append(argv, "--", "sh", "-c", "cat /proc/self/cgroup > "+ran)
		r := e.run(argv...)
		if r.status != 0 || r.stderr != "" {
			t.Errorf("conch %q: %v, want the child run in direct mode, silently", argv, r)
		}
		if !exists(ran) {
			t.Errorf("conch %q: the child did not run", argv)
		}
		_ = os.Remove(ran)
	}
	if n := e.keys(schema.NamePrefix("sc-auto")); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// D8: -p and --slice imply --scope=always; -p TimeoutStopSec= sets the grace period the fence
// margin must cover (D7).
func TestParseScopeFlags(t *testing.T) {
	for _, tt := range []struct {
		mode      string
		props     []string
		slice     string
		wantMode  unitrun.ScopeMode
		wantSlice string
		wantGrace time.Duration
	}{
		{"", nil, "", unitrun.ScopeAuto, "", 5 * time.Second},
		{"never", nil, "", unitrun.ScopeNever, "", 5 * time.Second},
		{"auto", []string{"MemoryMax=1G"}, "", unitrun.ScopeAlways, "", 5 * time.Second},
		{"auto", nil, "batch", unitrun.ScopeAlways, "batch.slice", 5 * time.Second},
		{"always", []string{"TimeoutStopSec=30s"}, "", unitrun.ScopeAlways, "", 30 * time.Second},
		{"auto", []string{"TimeoutStopSec=1min", "TimeoutStopSec=2s"}, "", unitrun.ScopeAlways, "", 2 * time.Second},
	} {
		f, err := parseScopeFlags(tt.mode, tt.props, tt.slice)
		if err != nil {
			t.Errorf("parseScopeFlags(%q, %q, %q): %v", tt.mode, tt.props, tt.slice, err)
			continue
		}
		opts := f.opts
		opts.KillAfter = 5 * time.Second // --kill-after 5s
		grace := planTiming(t, opts).KillAfter
		if f.opts.Mode != tt.wantMode || f.opts.Slice != tt.wantSlice || len(f.opts.Properties) != len(tt.props) || grace != tt.wantGrace {
			t.Errorf("parseScopeFlags(%q, %q, %q) = %+v (grace %v), want mode %v, slice %q, grace %v",
				tt.mode, tt.props, tt.slice, f, grace, tt.wantMode, tt.wantSlice, tt.wantGrace)
		}
	}
}
