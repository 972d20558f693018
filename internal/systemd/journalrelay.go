package systemd

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// relaySetupTimeout bounds the relay's set-up (its header function and the connect to
// journald). The command's first output waits in the pipe meanwhile; past this the header
// function's context ends and the relay connects with what it returned.
const relaySetupTimeout = 3 * time.Second

// relayFlushTimeout bounds how long the relay, at the end of the command's output, waits for
// journald to have read the stream to its end (CloseJournalStream), so that the caller's next
// entry comes after the command's last line. journald takes milliseconds; a journald too busy
// to answer within this only costs the order of those lines.
const relayFlushTimeout = time.Second

// JournalRelay carries a command's output into the journal as the caller's own writes
// (caller side; the guardian and the command only see a pipe). journald attributes each
// write to its writer's cgroup (see JournalStreamSocket), so output that the command wrote
// straight to the service's stream would be logged as the command's scope; relayed, it is
// logged as the unit the caller runs in, with the header's SYSLOG_IDENTIFIER. The caller
// must stay in that unit while the command runs, as conch does (D8 moves only the guardian).
type JournalRelay struct {
	w, r     *os.File      // the pipe: w for the command's stdout and/or stderr, r for the goroutine
	fallback io.Writer     // where output goes when the stream cannot be had
	done     chan struct{} // closed when the goroutine has ended
	err      error         // why the relay fell back, if it did; set before done is closed

	closeOnce sync.Once
	closeErr  error
}

// StartJournalRelay creates the pipe whose write end (File) is to be the command's stdout
// and/or stderr, and starts the relay's one goroutine. At the first output, that goroutine
// calls header with a context bounded by relaySetupTimeout and connects a stream to socket
// (normally JournalStreamSocket) with the header it returned (DialJournalStream); it copies
// all that is written into the pipe to the stream until every writer has closed it, then ends
// the stream and waits (up to relayFlushTimeout) for journald to have read it all, so that
// an entry the caller logs after Close comes after the command's last line. If the stream
// cannot be set up, or a write to it fails, the output goes to fallback (the caller's own
// stdout or stderr: logged as before, not lost). Close stops the goroutine and waits for it.
// The only error is the pipe's creation.
func StartJournalRelay(socket string, header func(context.Context) StreamHeader, fallback io.Writer) (*JournalRelay, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	j := &JournalRelay{w: w, r: r, fallback: fallback, done: make(chan struct{})}
	go j.run(socket, header)
	return j, nil
}

// File returns the write end of the relay's pipe, for Spec.Stdout and Spec.Stderr. It stays
// open until Close.
func (j *JournalRelay) File() *os.File { return j.w }

// run is the relay's goroutine. It sets the stream up only once there is output: a command
// that prints nothing (or never starts) costs no connection and no header call. It copies
// until EOF, or until Close ends a blocked read; then it ends an unfinished last line (as
// journald would at the stream's end) and waits for journald to have read the stream
// (CloseJournalStream).
func (j *JournalRelay) run(socket string, header func(context.Context) StreamHeader) {
	defer close(j.done)
	defer j.r.Close()
	buf := make([]byte, 32<<10)
	var out io.Writer
	var stream *net.UnixConn
	unfinished := false // the last byte written to stream is not a newline
	for {
		n, rerr := j.r.Read(buf)
		if n > 0 && out == nil {
			ctx, cancel := context.WithTimeout(context.Background(), relaySetupTimeout)
			conn, err := DialJournalStream(ctx, socket, header(ctx))
			cancel()
			if err != nil {
				j.err, out = err, j.fallback
			} else {
				defer CloseJournalStream(conn, relayFlushTimeout)
				stream, out = conn, conn
			}
		}
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil && out != j.fallback {
				j.err, out, stream = werr, j.fallback, nil
				_, _ = out.Write(buf[:n])
			}
			unfinished = buf[n-1] != '\n'
		}
		if rerr != nil {
			if stream != nil && unfinished {
				_, _ = stream.Write([]byte{'\n'})
			}
			return
		}
	}
}

// Close closes the caller's copy of the pipe's write end, then waits up to drain for the
// goroutine to copy what is left and see the pipe's end, which comes when the command, its
// guardian and every process they started have closed their copies too; past drain (a
// process that outlived the command holds the pipe) it stops reading and drops the rest.
// It returns why the relay fell back to the fallback writer, nil if it never did. Later
// calls return the same.
func (j *JournalRelay) Close(drain time.Duration) error {
	j.closeOnce.Do(func() {
		_ = j.w.Close()
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-j.done:
		case <-t.C:
			_ = j.r.SetReadDeadline(time.Now()) // ends the blocked Read; run closes r
			<-j.done
			j.err = errors.Join(j.err, errors.New("output written after the command ended was dropped"))
		}
		j.closeErr = j.err
	})
	return j.closeErr
}
