package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// scenario6: under systemd, where operators run conch. bin/bench-scope (bench/scope, built
// by `make bench`) boots one systemd node as the integration tests do (internal/systemdtest:
// the nspawn root filesystem is built on first use) and, inside it, from one transient
// service, runs conch in scope mode, conch --scope never, etcdctl lock and
// `etcdctl lock -- systemd-run --scope` side by side against this harness's etcd (the node
// shares the host's loopback): hand-off p50/p99, uncontended wall time, and a scope's creation
// timed step by step.
func (h *harness) scenario6() (*section, error) {
	sec := &section{n: 6, title: "Under systemd: scope mode against `etcdctl lock` with and without `systemd-run --scope`"}
	bin := filepath.Dir(h.conch)
	cfg := config6{Endpoint: h.etcd.endpoint, Reps: h.cfg.reps6, Rounds: h.cfg.rounds6, Batch: h.cfg.batch6, HoldMs: h.cfg.hold6, Probes: h.cfg.probes6, Trace: h.cfg.trace6}
	js, err := json.Marshal(cfg)
	if err != nil {
		return sec, err
	}
	out := filepath.Join(h.work, "s6.json")
	cmd := exec.CommandContext(h.ctx, filepath.Join(bin, "bench-scope"), "-test.run", "^$", "-test.bench", "^BenchmarkScopeScenario$", "-test.benchtime", "1x", "-test.timeout", "60m")
	cmd.Env = append(os.Environ(), "BENCH_SCOPE_OUT="+out, "BENCH_SCOPE_BIN="+bin, "BENCH_SCOPE_CONFIG="+string(js))
	if h.cfg.alt != "" { // -alt: that build (its conch-guardian beside it) in scope mode and direct
		alt, err := filepath.Abs(filepath.Dir(h.cfg.alt))
		if err != nil {
			return sec, err
		}
		cmd.Env = append(cmd.Env, "BENCH_SCOPE_ALT="+alt)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return sec, fmt.Errorf("bench-scope (needs root, systemd-nspawn and the test nodes' root filesystem, `make test-deps`): %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return sec, err
	}
	var o output6
	if err := json.Unmarshal(b, &o); err != nil {
		return sec, fmt.Errorf("bench-scope's output: %w", err)
	}
	for _, r := range o.Rows {
		sec.rows = append(sec.rows, row{measure: r[0], conch: r[1], ref: r[2], ratio: r[3], target: r[4], met: r[5]})
	}
	sec.detail = append(sec.detail, o.Detail)
	sec.notes = append(sec.notes, o.Notes...)
	return sec, nil
}

// config6 is bench/scope's Config as JSON (bin/bench does not link that package: it links
// unitrun, and bench links sema; only cmd/conch may link both).
type config6 struct {
	Endpoint string `json:"endpoint"`
	Reps     int    `json:"reps"`
	Rounds   int    `json:"rounds"`
	Batch    int    `json:"batch"`
	HoldMs   int    `json:"hold_ms"`
	Probes   int    `json:"probes"`
	Trace    bool   `json:"trace,omitempty"`
}

// output6 is bench/scope's Output as JSON.
type output6 struct {
	Rows   [][6]string `json:"rows"`
	Detail string      `json:"detail"`
	Notes  []string    `json:"notes,omitempty"`
}
