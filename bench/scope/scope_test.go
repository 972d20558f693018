package scopebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// driverEnv holds Drive's Config (JSON) when this binary runs inside the node.
const driverEnv = "BENCH_SCOPE_DRIVER"

// TestMain runs Drive instead of the tests when the host half started this binary in the node.
func TestMain(m *testing.M) {
	if js := os.Getenv(driverEnv); js != "" {
		var cfg Config
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench-scope: %v\n", err)
			os.Exit(2)
		}
		if err := Drive(context.Background(), cfg, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench-scope: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkScopeScenario is scenario 6 of bin/bench, which runs it once (-test.benchtime 1x)
// with BENCH_SCOPE_OUT (where to write Output as JSON), BENCH_SCOPE_BIN (the directory with
// conch, conch-guardian, etcdctl, bench-stamp and this binary, as bench-scope), and
// BENCH_SCOPE_CONFIG (Config as JSON without Bin and Work, which the node decides), and
// optionally BENCH_SCOPE_ALT (the directory of another conch build, -alt). It boots
// one node and runs Drive in it as a transient service.
func BenchmarkScopeScenario(b *testing.B) {
	out := os.Getenv("BENCH_SCOPE_OUT")
	if out == "" {
		b.Skip("run by bin/bench (scenario 6)")
	}
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv("BENCH_SCOPE_CONFIG")), &cfg); err != nil {
		b.Fatalf("BENCH_SCOPE_CONFIG: %v", err)
	}
	opts := systemdtest.Options{Name: "bench6", BinDir: os.Getenv("BENCH_SCOPE_BIN")}
	if alt := os.Getenv("BENCH_SCOPE_ALT"); alt != "" {
		opts.Binds = append(opts.Binds, systemdtest.Bind{Host: alt, Node: "/opt/alt"})
		cfg.Alt = "/opt/alt"
	}
	n := systemdtest.Boot(b, opts)
	cfg.Bin, cfg.Work = systemdtest.BinMount, "/var/tmp/bench6"
	js, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := n.Run(ctx, "mkdir", "-p", cfg.Work); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		res, err := n.RunWith(ctx, systemdtest.RunOptions{Env: []string{driverEnv + "=" + string(js)}}, systemdtest.BinMount+"/bench-scope")
		if err != nil {
			b.Fatalf("%v\n%s", err, res.Stderr)
		}
		if err := os.WriteFile(out, res.Stdout, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("driver: %s", strings.TrimSpace(string(res.Stderr)))
	}
}
