package systemd

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errNotUnified is PrimeMove's answer on a host whose /sys/fs/cgroup is not cgroup2.
var errNotUnified = errors.New("not a cgroup2 host")

// PrimeMove readies the kernel for a cgroup move that systemd is about to make for us (a
// scope's start moves the process it is given into the scope's new cgroup). The kernel makes
// a move wait for an RCU grace period (5-16 ms measured on 2-CPU hosts) unless another move
// ended within about one grace period before; that wait is most of a scope's start job. So
// PrimeMove moves the calling process into the cgroup it already belongs to (its PID written
// to that cgroup's cgroup.procs, which changes nothing, on the unified hierarchy only): the
// write pays the grace period itself, on the caller's goroutine, and a move systemd makes
// during it or shortly after finds the kernel ready and does not wait again (D8d).
//
// It blocks for the grace period (up to ~20 ms) and returns nil, errNotUnified on a host in
// hybrid or legacy cgroup mode, or the error of reading /proc/self/cgroup or of the write
// (for instance EACCES when the caller may not write its own cgroup.procs). Callers run it on
// a goroutine and ignore its error: it only saves time.
func PrimeMove() error {
	if !unifiedCgroups() {
		return errNotUnified
	}
	place, err := ReadPlacement(0, false)
	if err != nil {
		return err
	}
	// O_WRONLY without O_CREAT: cgroup.procs is never created, only written.
	f, err := os.OpenFile(filepath.Join("/sys/fs/cgroup", place.Cgroup, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(unix.Getpid()))
	return errors.Join(err, f.Close())
}
