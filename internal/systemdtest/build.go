package systemdtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// buildTimeout bounds one `go build` of test binaries on a busy 2-core machine.
const buildTimeout = 5 * time.Minute

// ModuleRoot returns the root directory of this Go module's source tree.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildBinaries builds the main packages pkgs (import paths, or paths relative to the module
// root such as "./cmd/conch") as static binaries (CGO_ENABLED=0) into a fresh temporary
// directory and returns it, ready for Options.BinDir: each binary is named after its package's
// last path element, so "./cmd/conch" runs as /opt/bin/conch in the node. It fails the test
// when the build fails. It must be called from the test goroutine. Under -short
// (testing.Short) it skips the test: the binaries are for systemd nodes, which the fast tier
// does not boot (BootAll).
func BuildBinaries(t testing.TB, pkgs ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries for systemd nodes: not in the -short tier")
	}
	dir := t.TempDir()
	// The node's root cannot traverse a 0700 directory owned by another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = ModuleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemdtest: go build %v: %v\n%s", pkgs, err, out)
	}
	return dir
}
