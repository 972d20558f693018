package systemdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
)

// rootfsBuildTimeout bounds one run of mkrootfs.sh: apt-get install (~10 s) plus mmdebstrap
// (~20 s cold on 2 cores) with room for a slow mirror.
const rootfsBuildTimeout = 10 * time.Minute

var rootfs struct {
	sync.Mutex
	path string // set once the cache is known to exist
}

// ScriptPath returns the absolute path of tests/vm/mkrootfs.sh in this source tree.
func ScriptPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tests", "vm", "mkrootfs.sh")
}

// EnsureRootfs returns the path of the cached read-only root filesystem the nodes boot from,
// running tests/vm/mkrootfs.sh first when the cache is missing (~20 s once per machine and
// package list; the script serialises concurrent builds with a lock file). Without root, or
// without systemd-nspawn and mmdebstrap, it skips the test when CI is unset (saying how to get
// them) and, under CI=true, lets the script install them or fails the test. It must be called
// from the test goroutine.
func EnsureRootfs(t testing.TB) string {
	t.Helper()
	rootfs.Lock()
	defer rootfs.Unlock()
	if rootfs.path != "" {
		return rootfs.path
	}
	if os.Geteuid() != 0 {
		ci.Unavailable(t, "systemdtest: booting nodes needs root; run the tests as root")
	}
	script := ScriptPath()
	path, err := runScript(script, "--print-path")
	if err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	var missing []string
	for _, cmd := range []string{"systemd-nspawn", "mmdebstrap", "nsenter"} {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, cmd)
		}
	}
	if _, err := os.Stat(path); err != nil || len(missing) > 0 {
		args := []string{}
		if !ci.Active() {
			if len(missing) > 0 {
				ci.Unavailable(t, "systemdtest: %v not found; install the prerequisites and the root filesystem with: sudo bash %s", missing, script)
			}
			args = append(args, "--no-install")
		}
		start := time.Now()
		if path, err = runScript(script, args...); err != nil {
			t.Fatalf("systemdtest: cannot install the prerequisites or build the root filesystem: %v", err)
		}
		t.Logf("systemdtest: %s ready in %v", path, time.Since(start).Round(time.Millisecond))
	}
	rootfs.path = path
	return path
}

// runScript runs mkrootfs.sh with args and returns the last line of its stdout (the path).
func runScript(script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rootfsBuildTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bash %s %s: %w\n%s", script, strings.Join(args, " "), err, tail(stderr.Bytes(), 4096))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path := lines[len(lines)-1]
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("bash %s %s printed %q, not a path", script, strings.Join(args, " "), path)
	}
	return path, nil
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
