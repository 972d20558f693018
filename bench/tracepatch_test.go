package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/ci"
)

// tracePatch is the trace-point patch `bin/bench -trace6` and bench/trace/handoff.sh need
// (bench/analysis.md), relative to the repository's root.
const tracePatch = "bench/trace/points.patch"

// The trace-point patch applies to the tree it is committed with, so that `-trace6` and
// bench/trace/handoff.sh keep working as the code it patches moves: when it no longer
// applies, the test names the files to refresh it for.
func TestTracePatchApplies(t *testing.T) {
	root, err := filepath.Abs("..") // go test runs in bench/
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		ci.Unavailable(t, "git is not installed: install git to check %s", tracePatch)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil { // a directory, or a worktree's file
		ci.Unavailable(t, "%s has no .git (not a git checkout): cannot check %s", root, tracePatch)
	}
	stderr, err := gitApplyCheck(t, root, tracePatch)
	if err == nil {
		return
	}
	if _, rerr := gitApplyCheck(t, root, "--reverse", tracePatch); rerr == nil {
		t.Fatalf("%s is applied to this working tree already: revert it (git apply -R %s) before testing", tracePatch, tracePatch)
	}
	t.Fatalf("%s no longer applies (git apply --check: %v) to: %s\n"+
		"Refresh it: in a scratch worktree, git apply --3way (or --reject) it, put each rejected trace "+
		"point at the same place in the moved code, keep the point names, and regenerate it with git diff.\n%s",
		tracePatch, err, strings.Join(rejectedFiles(stderr), ", "), stderr)
}

// gitApplyCheck runs `git apply --check args...` in root with C messages and no GIT_DIR or
// GIT_WORK_TREE of a caller (a hook) and returns its stderr and error (nil: it applies; an
// *exec.ExitError: it does not; else git did not run, which fails t).
func gitApplyCheck(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", append([]string{"apply", "--check"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_WORK_TREE=") || strings.HasPrefix(kv, "GIT_INDEX_FILE=")
	}), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("git apply --check: %v", err)
	}
	return stderr.String(), err
}

// applyError matches git apply's "error: patch failed: FILE:LINE", "error: FILE: patch does
// not apply" and "error: FILE: No such file or directory" lines; its group is FILE.
var applyError = regexp.MustCompile(`(?m)^error: (?:patch failed: )?([^:\s]+):`)

// rejectedFiles returns the files git apply's stderr names as not patchable, sorted, each
// once.
func rejectedFiles(stderr string) []string {
	var files []string
	for _, m := range applyError.FindAllStringSubmatch(stderr, -1) {
		files = append(files, m[1])
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// The file list of a failed check names every file git apply refused, once.
func TestRejectedFiles(t *testing.T) {
	stderr := "error: patch failed: cmd/conch/acquire.go:49\n" +
		"error: cmd/conch/acquire.go: patch does not apply\n" +
		"error: cmd/conch/scopeplan.go: No such file or directory\n" +
		"error: unitrun/scope.go: No such file or directory\n"
	want := []string{"cmd/conch/acquire.go", "cmd/conch/scopeplan.go", "unitrun/scope.go"}
	if got := rejectedFiles(stderr); !slices.Equal(got, want) {
		t.Errorf("rejectedFiles = %q, want %q", got, want)
	}
}
