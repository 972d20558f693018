package unitrun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// D7a: the small guardian program (cmd/conch-guardian). The test binary itself cannot carry a
// build ID (go test sets no -X), so the program's tests re-run the test binary with the
// environment below, which TestMain turns into this build's build ID and the program Run finds.
const (
	envTestBuildID  = "UNITRUN_TEST_BUILD_ID"         // this process's build ID
	envTestProgram  = "UNITRUN_TEST_GUARDIAN_PROGRAM" // the guardian program "found" beside us
	envTestExpected = "UNITRUN_TEST_EXPECT_GUARDIAN"  // TestGuardianInUse: "program" or "reexec"
	envTestWarning  = "UNITRUN_TEST_EXPECT_WARNING"   // TestGuardianInUse: in Spec.Warn's message ("": none)
	testProgramID   = "unitrun-test-build"
)

// useGuardianProgramFromEnv applies envTestBuildID and envTestProgram (TestMain).
func useGuardianProgramFromEnv() {
	if id := os.Getenv(envTestBuildID); id != "" {
		buildID = id
	}
	if p := os.Getenv(envTestProgram); p != "" {
		guardianProgram = func() string { return p }
	}
}

// buildGuardianProgram builds cmd/conch-guardian with build ID id into a fresh directory
// and returns its path.
func buildGuardianProgram(t testing.TB, id string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), guardianProgramName)
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/conch-project/conch/unitrun.buildID="+id,
		"-o", bin, "./cmd/conch-guardian")
	cmd.Dir = ".." // the module's root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/conch-guardian: %v\n%s", err, out)
	}
	return bin
}

// Which guardian ran the command: its parent's executable. Run alone it expects this program
// re-executed (no guardian program beside a test binary); the sub-runs of
// TestGuardianProgram set envTestExpected.
func TestGuardianInUse(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := self
	if os.Getenv(envTestExpected) == "program" {
		want = os.Getenv(envTestProgram)
	}
	out := filepath.Join(t.TempDir(), "parent")
	var warnings []string
	res, _, err := runSh(t.Context(), t, `readlink /proc/$PPID/exe > "`+out+`"`, func(s *Spec) {
		s.Warn = func(m string) { warnings = append(warnings, m) }
	})
	if err != nil || res.ExitStatus != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	// the operator is told why the guardian program was not used (D7a), and only then
	w := os.Getenv(envTestWarning)
	if w == "" && len(warnings) > 0 || w != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], w)) {
		t.Errorf("Spec.Warn told %q, want one message with %q", warnings, w)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != want {
		t.Errorf("the command's parent is %s, want %s", got, want)
	}
}

// The guardian program found beside the caller: used when its build is the caller's (and
// every D7 test passes with it: caller SIGKILLed, guardian stopped or killed, setsid
// grandchild); when its build differs, or it is missing, Run re-executes itself instead.
func TestGuardianProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	bin := buildGuardianProgram(t, testProgramID)
	d7 := "TestGuardianInUse|TestRunCallerKilled|TestRunGuardianStopped|TestRunGuardianStaysStopped|" +
		"TestRunGuardianKilledStopsSetsidGrandchild|TestRunGuardianDies|TestRunCancelEscalatesToSIGKILL|" +
		"TestRunStopsLeftovers|TestRunRuntimeMax|TestRunExitStatus|TestRunExecFailure|TestRunTerminal|" +
		"TestPreparedRun|TestPreparedClose|TestPreparedRunRefused|TestPreparedGuardianDied|TestPreparedCallerKilled"
	for _, tc := range []struct {
		name, buildID, program, expect, tests, warning string
	}{
		{"same build", testProgramID, bin, "program", d7, ""},
		// The fallback is the test binary re-executed, whose build ID is "" (its environment
		// is not the guardian's): so is the caller's here.
		{"other build", "", bin, "reexec", "TestGuardianInUse|TestRunExitStatus", "is of another build"},
		{"missing", "", filepath.Join(t.TempDir(), guardianProgramName), "reexec", "TestGuardianInUse|TestRunExitStatus", ""},
		// a program that never says hello (a hostile test's `sleep 100`): dropped after
		// helloTimeout, not waited for while the slot is held
		{"silent", "", silentProgram(t), "reexec", "TestGuardianInUse", "said nothing within 5s of its start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := rerunTests(t, "^("+tc.tests+")$", envTestBuildID+"="+tc.buildID, envTestProgram+"="+tc.program, envTestExpected+"="+tc.expect, envTestWarning+"="+tc.warning)
			for _, name := range strings.Split(tc.tests, "|") {
				if !strings.Contains(out, "--- PASS: "+name) {
					t.Errorf("%s did not pass:\n%s", name, out)
				}
			}
		})
	}
}

// silentProgram is an executable that starts and never speaks, in place of the guardian.
func silentProgram(t *testing.T) string {
	p := filepath.Join(t.TempDir(), guardianProgramName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec sleep 100\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// rerunTests runs this test binary again with the tests matching pattern and env added, and
// returns its verbose output; it fails the test if they fail.
func rerunTests(t *testing.T, pattern string, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*generousTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", pattern, env, err, out)
	}
	return string(out)
}

// The guardian program refuses a spec from a caller of another build (D7a: both ends compare),
// here a caller that does not know it for the guardian program and so does not check it.
func TestGuardianProgramRefusesOtherBuild(t *testing.T) {
	bin := buildGuardianProgram(t, testProgramID)
	res, err := run(t.Context(), Spec{stop: testStop, Path: "/bin/true", Guardian: []string{bin}})
	if !errors.Is(err, ErrGuardian) || res.Started || !strings.Contains(err.Error(), "refuses a caller of build") {
		t.Fatalf("Run with a guardian of another build = %+v, %v; want ErrGuardian, not started", res, err)
	}
}

func TestFindGuardianProgram(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := mk("usr/bin/conch", 0o755)
	if got := findGuardianProgram(exe); got != "" {
		t.Errorf("none installed: %q", got)
	}
	mk("usr/bin/"+guardianProgramName, 0o644) // not executable: not a guardian
	if got := findGuardianProgram(exe); got != "" {
		t.Errorf("not executable: %q", got)
	}
	libexec := mk("usr/libexec/conch/"+guardianProgramName, 0o755)
	if got := findGuardianProgram(exe); got != libexec {
		t.Errorf("in ../libexec/conch: %q, want %q", got, libexec)
	}
	beside := mk("usr/bin/"+guardianProgramName+".new", 0o755)
	if err := os.Rename(beside, filepath.Join(root, "usr/bin", guardianProgramName)); err != nil {
		t.Fatal(err)
	}
	if got, want := findGuardianProgram(exe), filepath.Join(root, "usr/bin", guardianProgramName); got != want {
		t.Errorf("beside conch and in libexec: %q, want the one beside, %q", got, want)
	}
}
