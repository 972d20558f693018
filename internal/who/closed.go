package who

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// closedPoll is how often watchClosed asks whether the output's reader is
// still there: a reader that goes away while the listing does not change
// ends the watch within about this long.
const closedPoll = 200 * time.Millisecond

// fder is an output with a file descriptor (an *os.File).
type fder interface{ Fd() uintptr }

// watchClosed watches out, when it is a pipe or a socket, for its reader
// going away (poll's POLLERR or POLLHUP on the writing end), and then calls
// cancel with ErrOutputClosed: a watch whose listing does not change would
// otherwise learn of it only at its next write (EPIPE). It starts one
// goroutine, which ends when ctx does; the returned func ends and joins
// it. For any other output it does nothing.
func watchClosed(ctx context.Context, out io.Writer, cancel context.CancelCauseFunc) func() {
	f, ok := out.(fder)
	if !ok || !isStream(f) {
		return func() {}
	}
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(closedPoll)
		defer t.Stop()
		for {
			if readerGone(int(f.Fd())) {
				cancel(ErrOutputClosed)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { stop(); wg.Wait() }
}

// isStream reports whether f is a pipe or a socket: the outputs whose
// reader can go away while nothing is written.
func isStream(f fder) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFIFO || st.Mode&unix.S_IFMT == unix.S_IFSOCK
}

// readerGone reports whether poll says the writing end fd has lost its
// reader (POLLERR for a pipe, POLLHUP for a socket), without waiting.
func readerGone(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd)}} // no events asked: POLLERR and POLLHUP come anyway
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
}

var _ fder = (*os.File)(nil) // stdout is one
