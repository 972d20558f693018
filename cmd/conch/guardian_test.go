package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildWithID builds the main package pkg with unitrun's build ID set to id, as `make build`
// does (D7a), into dir.
func buildWithID(t *testing.T, dir, pkg, id string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/conch-project/conch/unitrun.buildID="+id, "-o", bin, pkg)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// D7a: conch runs its child under conch-guardian when that program is beside it and of the
// same build, and under itself re-executed when the guardian program is of another build.
func TestGuardianProgramBesideConch(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	t.Parallel()
	same, other := t.TempDir(), t.TempDir()
	conch := buildWithID(t, same, "./cmd/conch", "conch-test-a")
	guardian := buildWithID(t, same, "./cmd/conch-guardian", "conch-test-a")
	otherConch := filepath.Join(other, "conch")
	if out, err := exec.Command("cp", conch, otherConch).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	buildWithID(t, other, "./cmd/conch-guardian", "conch-test-b")
	e := newEnv(t)
	for _, tc := range []struct{ conch, wantParent string }{
		{conch, guardian},
		{otherConch, otherConch},
	} {
		out := filepath.Join(e.dir, "parent")
		cmd := exec.Command(tc.conch, "sema", "guardian", "--max", "1", "--scope=never", "--",
			"sh", "-c", `readlink /proc/$PPID/exe > "$0"`, out)
		cmd.Env = e.vars
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", tc.conch, err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != tc.wantParent {
			t.Errorf("%s: the child's parent is %s, want %s", tc.conch, strings.TrimSpace(string(got)), tc.wantParent)
		}
	}
}
