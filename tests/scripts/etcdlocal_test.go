package scripts

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// scriptTimeout bounds one run of etcd-local.sh (it gives etcd ~10 s per attempt).
const scriptTimeout = 2 * time.Minute

// buildTimeout bounds building etcd and etcdctl: cold on a busy 2-core machine.
const buildTimeout = 10 * time.Minute

// etcdLocal runs scripts/etcd-local.sh ETCD DIR and returns its stdout, stderr and exit
// status (-1 when it could not run).
func etcdLocal(t *testing.T, etcd, dir string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(systemdtest.ModuleRoot(), "scripts", "etcd-local.sh"), etcd, dir)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0
	case errors.As(err, &exit):
		return o.String(), e.String(), exit.ExitCode()
	default:
		t.Fatalf("etcd-local.sh: %v", err)
		return "", "", -1
	}
}

// A directory the script did not make is never emptied: a non-empty one without the
// script's marker, or a path that is not a directory, is refused (exit 2) and left as it
// was. No etcd is needed to see it: the script refuses before it starts one.
func TestEtcdLocalRefusesForeignPaths(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious")
	if err := os.WriteFile(precious, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, status := etcdLocal(t, "/nonexistent/etcd", dir)
	if status != 2 || !strings.Contains(stderr, "is not empty and was not made by this script") {
		t.Errorf("non-empty directory: exit %d, stderr %q; want 2 and the reason", status, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "precious" {
		t.Errorf("the directory changed: %v (%v)", entries, err)
	}

	_, stderr, status = etcdLocal(t, "/nonexistent/etcd", precious)
	if status != 2 || !strings.Contains(stderr, "is not a directory") {
		t.Errorf("a file: exit %d, stderr %q; want 2 and the reason", status, stderr)
	}
	if data, err := os.ReadFile(precious); err != nil || string(data) != "keep me\n" {
		t.Errorf("the file changed: %q (%v)", data, err)
	}
}

// A new directory, an empty one, and again a directory the script made before: each time
// an etcd starts and answers, and the directory carries the marker.
func TestEtcdLocalStartsInItsOwnDirectories(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (builds the etcd binary): not in the -short tier")
	}
	bin := buildEtcd(t)
	newDir := filepath.Join(t.TempDir(), "new", "etcd")
	emptyDir := t.TempDir()
	for _, c := range []struct{ what, dir string }{
		{"a new directory", newDir},
		{"an empty directory", emptyDir},
		{"a directory it made before", newDir},
	} {
		stdout, stderr, status := etcdLocal(t, filepath.Join(bin, "etcd"), c.dir)
		if status != 0 {
			t.Fatalf("%s: exit %d: %s", c.what, status, stderr)
		}
		vars := systemdtest.KeyValues(stdout)
		pid, err := strconv.Atoi(vars["ETCD_PID"])
		if err != nil || vars["ETCD_ENDPOINT"] == "" {
			t.Fatalf("%s: output %q", c.what, stdout)
		}
		stopped := false // by stopEtcd; until then a failed test kills it (never a stale PID)
		t.Cleanup(func() {
			if !stopped {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		if _, err := os.Stat(filepath.Join(c.dir, ".etcd-local")); err != nil {
			t.Errorf("%s: no marker: %v", c.what, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "etcdctl"), "--endpoints", vars["ETCD_ENDPOINT"], "put", "k", "v").CombinedOutput()
		cancel()
		if err != nil || strings.TrimSpace(string(out)) != "OK" {
			t.Errorf("%s: etcdctl put: %v: %s", c.what, err, out)
		}
		stopEtcd(t, pid)
		stopped = true
	}
}

// buildEtcd builds etcd and etcdctl (tool dependencies in go.mod) into a directory of their
// own, as `make etcd` does.
func buildEtcd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, pkg := range map[string]string{"etcd": "go.etcd.io/etcd/server/v3", "etcdctl": "go.etcd.io/etcd/etcdctl/v3"} {
		ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = systemdtest.ModuleRoot()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir
}

// stopEtcd kills the etcd the script started (by its PID: the script's child, reparented
// when the script exited) and waits until it is gone, so the next run may use its directory.
func stopEtcd(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill etcd %d: %v", pid, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	err := systemdtest.WaitFor(ctx, "etcd "+strconv.Itoa(pid)+" to exit", func() (bool, error) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// gone, or a zombie left for whoever inherited it
		return err != nil || strings.Contains(string(stat), ") Z "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
