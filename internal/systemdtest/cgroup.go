package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupParent is the directory, in every cgroup hierarchy systemdtest uses, under which each
// node gets a cgroup of its own. tests/vm/cleanup.sh empties it after a killed test run.
const cgroupParent = "conch-test"

// nodeCgroups are the cgroups one node's systemd-nspawn starts in: one in the unified (v2)
// hierarchy, which cgroup.kill empties in one write, and on hybrid hosts one in the v1
// name=systemd hierarchy too. Without its own cgroup in both, two containers share one payload
// tree and their systemds fight (TESTING-INFRA.md).
type nodeCgroups struct {
	unified string // /sys/fs/cgroup[/unified]/conch-test/NAME
	named   string // /sys/fs/cgroup/systemd/conch-test/NAME, "" on a pure cgroup2 host
}

// cgroupRoots finds the mount points of the unified hierarchy and, on hybrid or legacy hosts,
// of the v1 name=systemd hierarchy.
func cgroupRoots() (unified, named string, err error) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil {
			unified = dir
			break
		}
	}
	if unified == "" {
		return "", "", errors.New("no cgroup2 (unified) hierarchy mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified")
	}
	if _, err := os.Stat("/sys/fs/cgroup/systemd/tasks"); err == nil {
		named = "/sys/fs/cgroup/systemd"
	}
	return unified, named, nil
}

// newNodeCgroups creates the cgroups for the node called name.
func newNodeCgroups(name string) (*nodeCgroups, error) {
	unified, named, err := cgroupRoots()
	if err != nil {
		return nil, err
	}
	c := &nodeCgroups{unified: filepath.Join(unified, cgroupParent, name)}
	if named != "" {
		c.named = filepath.Join(named, cgroupParent, name)
	}
	for _, dir := range c.dirs() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create cgroup: %w", err)
		}
	}
	return c, nil
}

func (c *nodeCgroups) dirs() []string {
	if c.named == "" {
		return []string{c.unified}
	}
	return []string{c.unified, c.named}
}

// procsFiles returns the cgroup.procs file of each of the node's cgroups: a process that writes
// its PID there before exec'ing systemd-nspawn starts the container from them.
func (c *nodeCgroups) procsFiles() []string {
	var files []string
	for _, dir := range c.dirs() {
		files = append(files, filepath.Join(dir, "cgroup.procs"))
	}
	return files
}

// kill SIGKILLs every process in the node's cgroups, nested cgroups included, and waits until
// they are empty or ctx ends.
func (c *nodeCgroups) kill(ctx context.Context) error {
	if err := os.WriteFile(filepath.Join(c.unified, "cgroup.kill"), []byte("1"), 0); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot kill cgroup %s: %w", c.unified, err)
		}
	}
	// Fallback for kernels without cgroup.kill, and for processes only in name=systemd.
	for {
		pids := c.pids()
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroups %v still hold %v: %w", c.dirs(), pids, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pids lists the processes in the node's cgroups and their descendants.
func (c *nodeCgroups) pids() []int {
	var pids []int
	for _, dir := range c.dirs() {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// remove deletes the node's cgroups, innermost first. The kernel refuses (EBUSY) while a dying
// process is still being torn down, so it retries until ctx ends.
func (c *nodeCgroups) remove(ctx context.Context) error {
	for _, root := range c.dirs() {
		for {
			err := removeTree(root)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cannot remove cgroup %s: %w", root, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// removeTree rmdirs a cgroup directory and every cgroup below it (cgroupfs refuses
// os.RemoveAll: its control files cannot be unlinked).
func removeTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, dir := range slices.Backward(dirs) {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
	}
	return nil
}
