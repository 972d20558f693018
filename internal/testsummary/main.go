// Command testsummary reads `go test -json` on stdin, prints the package
// result lines, the output of failed tests and the names of skipped ones,
// then the names of the failed tests again (so the end of a long log says what
// failed) and one closing line "N passed, N failed, N skipped".
//
// It exits 1 if a test or package failed, or, when CI is set (internal/ci), if any test was
// skipped: in CI a skipped test is a failure (the harness must install what
// a test needs instead).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/ci"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	os.Exit(summarize(os.Stdin, os.Stdout, ci.Active()))
}

// summary is what summarize gathers from the event stream.
type summary struct {
	out                     io.Writer
	passed, failed, skipped int
	skips                   []string                    // "pkg Test: why"
	failures                []string                    // "pkg Test", in the order they failed
	failedPkgs              []string                    // packages that failed, with or without a failed test
	outputs                 map[string]*strings.Builder // per test, kept until it ends
	progress                progress                    // packages running and done (progress.go)
}

// summarize reads `go test -json` from r, writes the summary to w and returns the exit
// status: 1 if a test or package failed, or if a test was skipped and inCI; else 0.
func summarize(r io.Reader, w io.Writer, inCI bool) int {
	s := &summary{out: w, outputs: map[string]*strings.Builder{}, progress: progress{began: time.Now()}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(w, sc.Text()) // build errors and the like
			continue
		}
		s.handle(e)
	}
	return s.finish(inCI)
}

// handle takes one event.
func (s *summary) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		if e.Test == "" {
			if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
				strings.HasPrefix(e.Output, "---") || strings.HasPrefix(e.Output, "panic") ||
				strings.Contains(e.Output, "[no test files]") {
				fmt.Fprint(s.out, e.Output)
			}
			return
		}
		b := s.outputs[key]
		if b == nil {
			b = &strings.Builder{}
			s.outputs[key] = b
		}
		b.WriteString(e.Output)
	case "build-output": // compiler and vet errors (Go 1.24+)
		fmt.Fprint(s.out, e.Output)
	case "start":
		s.progress.started(e.Package)
	case "pass", "fail", "skip":
		if e.Test == "" {
			if e.Action == "fail" {
				s.packageFailed(e.Package)
			}
			fmt.Fprint(s.out, s.progress.ended(e.Package, s.passed, s.failed, s.skipped, time.Now()))
			return
		}
		s.testEnded(e, key)
		if e.Action == "pass" && time.Duration(e.Elapsed*float64(time.Second)) >= slowTest { // progress inside a long package
			fmt.Fprintf(s.out, "   .. %s %s passed (%.1fs)\n", e.Package, e.Test, e.Elapsed)
		}
	}
}

// slowTest is how long a test (or subtest) must have taken for its pass to get a progress
// line: the systemd node tests (tests/vm) run for minutes with no package ending, their
// scenarios take 5-60 s each, while unit tests stay quiet.
const slowTest = 5 * time.Second

// packageFailed records a failed package. A panic or -timeout ends the package with tests
// that never reported: they failed, and their output says why.
func (s *summary) packageFailed(pkg string) {
	s.failedPkgs = append(s.failedPkgs, pkg)
	var unfinished []string
	for k := range s.outputs {
		if strings.HasPrefix(k, pkg+" ") {
			unfinished = append(unfinished, k)
		}
	}
	sort.Strings(unfinished)
	for _, k := range unfinished {
		s.failed++
		s.failures = append(s.failures, k+" (did not finish)")
		fmt.Fprintf(s.out, "--- FAIL: %s (did not finish)\n%s", k, s.outputs[k].String())
		delete(s.outputs, k)
	}
}

// testEnded records a test's pass, fail or skip.
func (s *summary) testEnded(e event, key string) {
	switch e.Action {
	case "pass":
		s.passed++
	case "fail":
		s.failed++
		s.failures = append(s.failures, key)
		if b := s.outputs[key]; b != nil {
			fmt.Fprint(s.out, b.String())
		}
	case "skip":
		s.skipped++
		msg := ""
		if b := s.outputs[key]; b != nil {
			msg = strings.TrimSpace(b.String())
		}
		s.skips = append(s.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, msg))
	}
	delete(s.outputs, key)
}

// finish prints the skipped tests, the failed tests and packages, and the closing line, and
// returns the exit status.
func (s *summary) finish(inCI bool) int {
	sort.Strings(s.skips)
	for _, l := range s.skips {
		fmt.Fprintln(s.out, "SKIP", l)
	}
	for _, f := range s.failures {
		fmt.Fprintln(s.out, "FAILED", f)
	}
	for _, p := range s.failedPkgs {
		if !s.hasFailure(p) { // a build error, a failing TestMain: no test to name
			fmt.Fprintln(s.out, "FAILED", p, "(the package: see its output above)")
		}
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	switch {
	case s.failed > 0 || len(s.failedPkgs) > 0:
		return 1
	case s.skipped > 0 && inCI:
		fmt.Fprintln(s.out, "FAIL: tests were skipped in CI; install what they need")
		return 1
	}
	return 0
}

// hasFailure reports whether a test of pkg is among the failures.
func (s *summary) hasFailure(pkg string) bool {
	for _, f := range s.failures {
		if strings.HasPrefix(f, pkg+" ") {
			return true
		}
	}
	return false
}
