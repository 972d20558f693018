package unitrun

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// This file runs in the caller's process (conch): Run's fallback when the guardian is lost.

// fallbackPollInterval is how often Run checks whether the command's process group is gone
// when it has to stop the group itself because the guardian died.
const fallbackPollInterval = 50 * time.Millisecond

// stopOrphans stops, without the guardian, every descendant of this process that is not a
// live guardian or below one: after a guardian's death the command and its descendants are
// reparented here (the caller is a child subreaper, D7). It sends sig, then SIGCONT, to them
// and to process group pgid while its leader is still an unreaped child of ours (so the PGID
// is certainly the command's), then SIGKILL once grace has passed (at once for grace <= 0),
// again every fallbackPollInterval, reaping each child of ours that ends (by PID, never
// wait4(-1): the guardians' waits are os/exec's). It returns once none is left.
func stopOrphans(pgid int, sig syscall.Signal, grace time.Duration) {
	self := os.Getpid()
	// send signals every orphan and reaps those that have ended; it reports whether any
	// was left.
	send := func(sigs ...syscall.Signal) bool {
		procs, err := descendantsExcept(guardianSet())
		if err != nil {
			// Cannot list /proc: at least the group, as long as there is a signal to send
			// (until SIGKILL, which ends the wait: nothing more can be learnt).
			for _, s := range sigs {
				_ = signalGroup(pgid, s)
			}
			return len(sigs) == 0 || sigs[0] != syscall.SIGKILL
		}
		for _, s := range sigs {
			for _, p := range procs {
				if p.pid == pgid && p.ppid == self {
					_ = signalGroup(pgid, s)
				}
				_ = signalProc(p, s)
			}
		}
		for _, p := range procs {
			if p.ppid == self {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(p.pid, &ws, unix.WNOHANG|unix.WALL, nil)
			}
		}
		return len(procs) > 0
	}
	first := []syscall.Signal{syscall.SIGKILL}
	if grace > 0 {
		first = []syscall.Signal{sig}
		if sig != syscall.SIGCONT && sig != syscall.SIGKILL {
			first = append(first, syscall.SIGCONT)
		}
	}
	left := send(first...)
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(fallbackPollInterval)
	defer tick.Stop()
	for left {
		<-tick.C
		if time.Now().Before(deadline) {
			left = send()
		} else {
			left = send(syscall.SIGKILL)
		}
	}
}
