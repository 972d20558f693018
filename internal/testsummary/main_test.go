package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goTestTimeout bounds one `go test -json` of the sample module on a busy machine.
const goTestTimeout = 5 * time.Minute

// A sample module whose tests pass, fail (also in a subtest), skip and panic, and a package
// that does not build.
var sample = map[string]string{
	"go.mod": "module sample\n\ngo 1.24\n",
	"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {}
func TestFail(t *testing.T) { t.Fatal("boom") }
func TestSkip(t *testing.T) { t.Skip("no tool") }
func TestSub(t *testing.T) {
	t.Run("good", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Error("sub boom") })
}
`,
	"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { undefined() }\n",
	"c/c_test.go": `package c

import "testing"

func TestOK(t *testing.T) {}
func TestPanics(t *testing.T) { panic("kaboom") }
`,
}

// goTestJSON runs `go test -json ./...` in a fresh copy of the sample module and returns
// its output (go test itself exits 1: tests fail).
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, text := range sample {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), goTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("go test: %v", err)
	}
	return out
}

// The summary of a real go test run ends with the failed tests and the package that did not
// build, named again after all the output, then the counts; the status is 1.
func TestSummaryNamesFailuresAtTheEnd(t *testing.T) {
	var out bytes.Buffer
	status := summarize(bytes.NewReader(goTestJSON(t)), &out, false)
	if status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Logf("summary:\n%s", out.String())
	want := []string{
		"FAILED sample/a TestFail",
		"FAILED sample/a TestSub/bad",
		"FAILED sample/a TestSub",
		"FAILED sample/c TestPanics",
		"FAILED sample/b (the package: see its output above)",
		"3 passed, 4 failed, 1 skipped",
	}
	if len(lines) < len(want) {
		t.Fatalf("summary has %d lines", len(lines))
	}
	tail := lines[len(lines)-len(want):]
	// The packages run in parallel: the failed tests may come in any package order.
	for _, w := range want {
		if !containsLine(tail, w) {
			t.Errorf("the summary's last %d lines lack %q:\n%s", len(want), w, strings.Join(tail, "\n"))
		}
	}
	if tail[len(tail)-1] != want[len(want)-1] {
		t.Errorf("last line %q, want %q", tail[len(tail)-1], want[len(want)-1])
	}
	for _, w := range []string{"boom", "sub boom", "kaboom", "SKIP sample/a TestSkip: ", "undefined"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the summary lacks %q", w)
		}
	}
}

// With CI set, a skip alone fails the run; without CI it does not.
func TestSummarySkipsFailInCI(t *testing.T) {
	events := `{"Action":"run","Package":"p","Test":"TestS"}
{"Action":"output","Package":"p","Test":"TestS","Output":"    s_test.go:5: no tool\n"}
{"Action":"skip","Package":"p","Test":"TestS"}
{"Action":"pass","Package":"p"}
`
	for _, c := range []struct {
		inCI bool
		want int
	}{{false, 0}, {true, 1}} {
		var out bytes.Buffer
		if got := summarize(strings.NewReader(events), &out, c.inCI); got != c.want {
			t.Errorf("CI=%v: status %d, want %d:\n%s", c.inCI, got, c.want, out.String())
		}
		if !strings.Contains(out.String(), "0 passed, 0 failed, 1 skipped\n") || strings.Contains(out.String(), "FAILED") {
			t.Errorf("CI=%v: summary:\n%s", c.inCI, out.String())
		}
	}
}

// A package that times out or panics ends with tests that never reported: each is counted
// and named as failed ("did not finish").
func TestSummaryUnfinishedTests(t *testing.T) {
	events := `{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p"}
`
	var out bytes.Buffer
	if got := summarize(strings.NewReader(events), &out, false); got != 1 {
		t.Errorf("status %d, want 1", got)
	}
	if !strings.HasSuffix(out.String(), "FAILED p TestHang (did not finish)\n0 passed, 1 failed, 0 skipped\n") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func containsLine(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}
