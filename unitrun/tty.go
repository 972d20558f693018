package unitrun

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Terminal hand-over (D5). The guardian puts the command's process group in the terminal's
// foreground at start (SysProcAttr.Foreground); Run hands the terminal back to its own group
// once the command's tree is gone, as a shell does when a foreground job ends.

// foregroundOf returns the foreground process group of the terminal f, or an error when f is
// nil or not a terminal.
func foregroundOf(f *os.File) (int, error) {
	if f == nil {
		return 0, unix.ENOTTY
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var pgrp int
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		pgrp, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	}); err != nil {
		return 0, err
	}
	return pgrp, ioErr
}

// inForeground reports whether f is a terminal whose foreground process group is the caller's.
// Only then does the command get the terminal (D5).
func inForeground(f *os.File) bool {
	pgrp, err := foregroundOf(f)
	return err == nil && pgrp == unix.Getpgrp()
}

// reclaimForeground makes the caller's process group the foreground group of terminal f again
// if it is not. The caller's group is in the background at that point, so tcsetpgrp would
// raise SIGTTOU and stop the whole group: SIGTTOU is blocked around the call, on a locked
// thread, which the kernel treats like an ignored SIGTTOU without touching the process-wide
// disposition that main may own.
func reclaimForeground(f *os.File) error {
	own := unix.Getpgrp()
	if pgrp, err := foregroundOf(f); err != nil || pgrp == own {
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var block, old unix.Sigset_t
	sigsetAdd(&block, unix.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &block, &old); err != nil {
		return err
	}
	defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPGRP, own)
	}); err != nil {
		return err
	}
	return ioErr
}

// sigsetAdd adds sig to set (sigaddset(3)); the word size of Sigset_t differs between
// architectures.
func sigsetAdd(set *unix.Sigset_t, sig unix.Signal) {
	const bits = 8 * unsafe.Sizeof(set.Val[0])
	n := uintptr(sig) - 1
	set.Val[n/bits] |= 1 << (n % bits)
}
