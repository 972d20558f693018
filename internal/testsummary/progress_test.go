package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// Each package's end prints a progress line (packages done, counts so far, time, packages
// still running), so a long `make test` shows it is moving between packages.
func TestSummaryProgressBetweenPackages(t *testing.T) {
	events := `{"Action":"start","Package":"p"}
{"Action":"start","Package":"q"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p"}
{"Action":"run","Package":"q","Test":"TestB"}
{"Action":"skip","Package":"q","Test":"TestB"}
{"Action":"pass","Package":"q"}
`
	var out bytes.Buffer
	summarize(strings.NewReader(events), &out, false)
	lines := strings.Split(out.String(), "\n")
	first := regexp.MustCompile(`^== 1 package\(s\) done after [0-9a-z.]+: 1 passed, 0 failed, 0 skipped so far; running: q$`)
	second := regexp.MustCompile(`^== 2 package\(s\) done after [0-9a-z.]+: 1 passed, 0 failed, 1 skipped so far$`)
	if len(lines) < 3 || lines[0] != "ok  \tp\t0.1s" || !first.MatchString(lines[1]) || !second.MatchString(lines[2]) {
		t.Errorf("summary:\n%s", out.String())
	}
}

// A test or subtest that took 5 s or more gets a progress line when it passes, so a package
// that runs for minutes (tests/vm) shows it is moving; quick tests stay quiet. Before, tests/vm
// ran about 5 minutes with no output.
func TestSummaryProgressInsideAPackage(t *testing.T) {
	events := `{"Action":"start","Package":"vm"}
{"Action":"run","Package":"vm","Test":"TestMultiNode"}
{"Action":"run","Package":"vm","Test":"TestMultiNode/1-Capacity"}
{"Action":"pass","Package":"vm","Test":"TestMultiNode/1-Capacity","Elapsed":12.5}
{"Action":"run","Package":"vm","Test":"TestQuick"}
{"Action":"pass","Package":"vm","Test":"TestQuick","Elapsed":0.2}
`
	var out bytes.Buffer
	summarize(strings.NewReader(events), &out, false)
	if !strings.Contains(out.String(), "   .. vm TestMultiNode/1-Capacity passed (12.5s)\n") || strings.Contains(out.String(), "TestQuick") {
		t.Errorf("summary:\n%s", out.String())
	}
}
