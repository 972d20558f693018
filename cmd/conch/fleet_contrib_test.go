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
	t.Parallel()
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

// Every oneshot unit shipped in contrib that runs conch, and the oneshot examples of README,
// the manual's pages (docs/) and the man page, list SIGTERM in SuccessExitStatus=: conch dies
// of the SIGTERM of `systemctl stop` (D3), which a oneshot unit otherwise counts as a failure
// (D3a).
func TestContribOneshotStopIsSuccess(t *testing.T) {
	units, err := filepath.Glob(filepath.Join("..", "..", "contrib", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no contrib units: %v", err)
	}
	texts := map[string]string{}
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no manual pages: %v", err)
	}
	for _, f := range append(append(units, pages...), filepath.Join("..", "..", "README.md"), filepath.Join("man", "tail.roff")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = strings.ReplaceAll(string(b), `\-`, "-")
	}
	block := regexp.MustCompile(`(?s)Type=oneshot\n.*?(?:\n\n|\n\x60\x60\x60|\n\.fi|$)`)
	found := 0
	for f, text := range texts {
		for _, b := range block.FindAllString(text, -1) {
			if !strings.Contains(b, "/usr/bin/conch ") {
				continue
			}
			found++
			st := regexp.MustCompile(`(?m)^SuccessExitStatus=(.*)$`).FindStringSubmatch(b)
			if st == nil || !strings.Contains(" "+st[1]+" ", " SIGTERM ") {
				t.Errorf("%s: oneshot unit running conch without SIGTERM in SuccessExitStatus=:\n%s", f, b)
			}
		}
	}
	if found < 5 {
		t.Errorf("found %d oneshot units running conch, want at least 5 (contrib, README, docs/, man page)", found)
	}
}
