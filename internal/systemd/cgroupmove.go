package systemd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errNotUnified is PrimeMove's answer on a host whose /sys/fs/cgroup is not cgroup2.
var errNotUnified = errors.New("not a cgroup2 host")

// errNotOurCgroup is PrimeMove's answer when the cgroup that /proc/self/cgroup names is not
// the one at that path under /sys/fs/cgroup: in a cgroup namespace whose /sys/fs/cgroup was
// mounted outside it, the path is relative to another root.
var errNotOurCgroup = errors.New("the cgroup file system shows another cgroup at our cgroup's path")

// PrimeMove readies the kernel for a cgroup move that systemd is about to make for us (a
// scope's start moves the process it is given into the scope's new cgroup). The kernel makes
// a move wait for an RCU grace period (5-16 ms measured on 2-CPU hosts) unless another move
// ended within about one grace period before; that wait is most of a scope's start job. So
// PrimeMove moves the calling process into the cgroup it already belongs to (its PID written
// to that cgroup's cgroup.procs, on the unified hierarchy only, once that file lists the PID):
// the write changes nothing, pays the grace period itself, on the caller's goroutine, and a
// move systemd makes during it or shortly after finds the kernel ready and does not wait
// again (D8d).
//
// It blocks for the grace period (a few to ~20 ms; longer only while the kernel's cgroup
// lock is held elsewhere) and returns nil; errNotUnified on a host in hybrid or legacy cgroup
// mode; errNotOurCgroup when the cgroup at our path does not list our PID (a cgroup namespace
// over a file system mounted outside it: the write would move us); or the error of reading
// /proc/self/cgroup or the cgroup's files, or of the write (for instance EACCES from the open
// when the caller may not write its own cgroup.procs). Callers run it on a goroutine and
// ignore its error: it only saves time.
func PrimeMove() error {
	if !unifiedCgroups() {
		return errNotUnified
	}
	place, err := ReadPlacement(0, false)
	if err != nil {
		return err
	}
	procs := filepath.Join("/sys/fs/cgroup", place.Cgroup, "cgroup.procs")
	pid := strconv.Itoa(unix.Getpid())
	listed, err := os.ReadFile(procs)
	if err != nil {
		return err
	}
	if !hasLine(listed, pid) {
		return fmt.Errorf("%s: %w", procs, errNotOurCgroup)
	}
	// O_WRONLY without O_CREAT: cgroup.procs is never created, only written.
	f, err := os.OpenFile(procs, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(pid)
	return errors.Join(err, f.Close())
}

// hasLine reports whether text has a line that is exactly line.
func hasLine(text []byte, line string) bool {
	for l := range bytes.Lines(text) {
		if string(bytes.TrimSuffix(l, []byte("\n"))) == line {
			return true
		}
	}
	return false
}
