package slotrun

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/conch-project/conch/sema"
	"golang.org/x/sys/unix"
)

// signaller is a context's cause that says the process got a signal and must stop (D3): the
// caller cancels the run's context with such a cause, and the run stops the child, releases,
// and reports the signal for the caller to re-raise.
type signaller interface{ Signal() syscall.Signal }

// SignalOf returns the signal a cause carries (an error in its chain with a method
// Signal() syscall.Signal), or 0 when it carries none.
func SignalOf(cause error) syscall.Signal {
	var s signaller
	if errors.As(cause, &s) {
		return s.Signal()
	}
	return 0
}

// SlotLost reports whether cause, a bound context's cause (sema.Holder.Bind), is the slot's
// loss (D7: sema.ErrLeaseLost, ErrFenced, ErrKeyDeleted...): not nil, no signal, not the
// release and not a plain cancellation.
func SlotLost(cause error) bool {
	return cause != nil && SignalOf(cause) == 0 && !errors.Is(cause, sema.ErrReleased) && !errors.Is(cause, context.Canceled)
}

// ownsTerminal reports whether f is a terminal whose foreground process group is this
// process's: then unitrun gives the child the terminal's foreground (D5), and Ctrl-C reaches
// the child only.
func ownsTerminal(f *os.File) bool {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
