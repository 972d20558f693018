package unitrun

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-project/conch/internal/systemd"
)

// The guardian protocol (D7). conch passes two pipes to the guardian, never anything through
// the environment the command could inherit:
//
//   - the control pipe (conch -> guardian, fd ctlFD): one JSON line with the wireSpec, sent
//     when Run is called (the guardian may have been started by prepare long before and waits
//     for it), then one word per line: ctlGo, ctlStop, ctlKill, ctlAbort or ctlDeadline with its values. EOF means conch died or
//     closed a prepared guardian: stop, or exit if nothing was started.
//   - the status pipe (guardian -> conch, fd statusFD): JSON lines of guardianEvent, in the
//     order evHello (the guardian's build ID, sent as soon as it runs), evReady, then evStarted or evExecError, then (scope mode) evCmdExited as soon as
//     the command is reaped, then evExited once its whole tree is gone, after which the
//     guardian only exits; evStopSignal (scope mode) when the guardian gets the scope's stop
//     signal from systemd; evError on a protocol failure. EOF means the guardian exited. In
//     scope mode the guardian may be SIGKILLed by systemd at the end of the scope's stop
//     timeout before it sends evExited: evCmdExited is sent early so that the command's status
//     is known then too.
//
// The format needs no versioning because both ends come from one build (D7a): either the
// same binary image (the guardian is /proc/self/exe re-executed), or the guardian program
// beside conch, which Run trusts only once evHello carried conch's own non-empty build ID
// (before the spec is sent); the guardian in turn refuses a spec whose Build is not its own.
const (
	ctlFD    = 3 // ExtraFiles[0] in the guardian
	statusFD = 4 // ExtraFiles[1] in the guardian

	ctlGo    = "go"    // start the command now
	ctlStop  = "stop"  // stop the command and its descendants (stop signal, grace, SIGKILL)
	ctlAbort = "abort" // exit without starting the command (BeforeStart failed)
	ctlKill  = "kill"  // stop the command and its descendants with SIGKILL at once (D7b)
	// ctlDeadline, followed by two CLOCK_MONOTONIC instants in nanoseconds (the caller's fence
	// and the lease's deadline), is the caller's latest Deadline (D7b); sent before ctlGo and
	// after every change while the command runs.
	ctlDeadline = "deadline"

	evHello      = "hello"          // the guardian runs: Build, its build ID (D7a)
	evReady      = "ready"          // spec read, subreaper set; waiting for ctlGo
	evStarted    = "started"        // command running: PID
	evExecError  = "exec-error"     // command could not be started: Kind, Msg
	evCmdExited  = "command-exited" // scope mode: command reaped (descendants may remain): Status, Signal
	evStopSignal = "stop-signal"    // scope mode: systemd is stopping the scope (on its own, or at Run's StopScope)
	evExited     = "exited"         // command and all its descendants are gone: Status, Signal, Stopped
	evError      = "error"          // the guardian cannot go on: Msg
)

// wireSpec is the part of Spec the guardian needs.
type wireSpec struct {
	Path       string        `json:"path"`
	Args       []string      `json:"args"`
	Env        []string      `json:"env"`
	Dir        string        `json:"dir,omitempty"`
	StopSignal int           `json:"stop_signal"`
	KillAfter  time.Duration `json:"kill_after_ns"`
	// Foreground asks for the command's process group to become the foreground group of the
	// terminal on the guardian's stdin (D5).
	Foreground bool `json:"foreground,omitempty"`
	// Build is the caller's build ID (D7a): the guardian refuses a spec from another build.
	Build string `json:"build,omitempty"`
	// Scope is set in scope mode (D8): the guardian then lives in that scope, survives the
	// scope's stop signal until the command's tree is gone, and stops the scope itself when
	// conch dies (D7).
	Scope *wireScope `json:"scope,omitempty"`
}

// wireScope tells the guardian which scope it runs in and how to reach the manager owning it
// (the guardian's environment is empty, so it cannot find the user manager on its own).
type wireScope struct {
	Unit  string                   `json:"unit"`
	Addrs []systemd.ManagerAddress `json:"addrs"`
}

// guardianEvent is one line on the status pipe.
type guardianEvent struct {
	Event   string `json:"event"`
	PID     int    `json:"pid,omitempty"`
	Status  int    `json:"status,omitempty"`
	Signal  int    `json:"signal,omitempty"`
	Stopped bool   `json:"stopped,omitempty"` // the stop began while the command still ran
	// Fenced (evExited): the guardian began the stop on its own, at its copy of the lease's
	// deadline, the caller having sent neither a new deadline nor a stop word (D7b)
	Fenced bool   `json:"fenced,omitempty"`
	Msg    string `json:"msg,omitempty"`
	Build  string `json:"build,omitempty"` // evHello: the guardian's build ID
	// Kind (evExecError): kindNotFound or kindNotExecutable, why the command could not be
	// executed; the caller maps it to its error, never to an exit status
	Kind string `json:"kind,omitempty"`
}

// parseSpec decodes the first line of the control pipe.
func parseSpec(line []byte) (wireSpec, error) {
	var ws wireSpec
	if err := json.Unmarshal(line, &ws); err != nil {
		return ws, fmt.Errorf("cannot decode the spec from the control pipe: %w", err)
	}
	if ws.Path == "" || len(ws.Args) == 0 || ws.StopSignal <= 0 || ws.KillAfter <= 0 {
		return ws, fmt.Errorf("invalid spec on the control pipe: %s", line)
	}
	return ws, nil
}

// readControl sends each control word read from r to the returned channel, which it closes at
// EOF or on a read error (both mean: conch is gone). The goroutine ends then. fd is r's file
// descriptor.
//
// A go that conch has already withdrawn is dropped (D7): when more input, or the pipe's EOF,
// is already pending as go is read, the guardian was stopped or slow while conch wrote go and
// then, the slot lost or conch gone, a stop, an abort or its death; that next word (or the EOF)
// is what counts, and the command must not start after it. Since the spec may be preloaded
// long before the slot (prepared.preload), go can otherwise wait in the pipe for a guardian
// that is SIGSTOPped.
func readControl(r *bufio.Reader, fd int) <-chan string {
	ch := make(chan string, 4)
	go func() {
		defer close(ch)
		for {
			line, err := r.ReadString('\n')
			word := strings.TrimSuffix(line, "\n")
			if word == ctlGo && err == nil && controlPending(r, fd) {
				if goUnlessWithdrawn(r, fd, ch) {
					return
				}
				continue
			}
			if word != "" {
				ch <- word
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// goUnlessWithdrawn reads what is pending after a go (readControl) and sends go to ch only if
// no stop, kill, abort or EOF is among it; deadline words (D7b), which conch sends before and
// after go, are passed on meanwhile and do not decide. It reports whether the pipe ended.
func goUnlessWithdrawn(r *bufio.Reader, fd int, ch chan<- string) bool {
	for {
		next, err := r.ReadString('\n')
		switch nw := strings.TrimSuffix(next, "\n"); {
		case nw == ctlStop || nw == ctlAbort || nw == ctlKill:
			ch <- nw // instead of go
			return err != nil
		case strings.HasPrefix(nw, ctlDeadline+" "):
			ch <- nw
		case nw != "":
			ch <- ctlGo
			ch <- nw
			return err != nil
		}
		if err != nil {
			return true // EOF: conch is gone, close without go
		}
		if !controlPending(r, fd) {
			ch <- ctlGo
			return false
		}
	}
}

// controlPending reports whether more control input, or the pipe's EOF (every writer closed:
// conch exited or closed it), is already there after what r returned: buffered in r, or
// readable on fd without blocking.
func controlPending(r *bufio.Reader, fd int) bool {
	if r.Buffered() > 0 {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
}

// readEvents sends each event decoded from r to the returned channel. At EOF (the guardian
// exited), or once an undecodable stream has been drained to EOF after an evError event, it
// closes r and the channel and ends. The caller must receive until the channel is closed.
func readEvents(r io.ReadCloser) <-chan guardianEvent {
	ch := make(chan guardianEvent, 4)
	go func() {
		defer close(ch)
		defer func() { _ = r.Close() }()
		dec := json.NewDecoder(r)
		for {
			var ev guardianEvent
			if err := dec.Decode(&ev); err != nil {
				if err != io.EOF {
					ch <- guardianEvent{Event: evError, Msg: "bad status line: " + err.Error()}
					_, _ = io.Copy(io.Discard, r) // drain until the guardian exits
				}
				return
			}
			ch <- ev
		}
	}()
	return ch
}

// eventWriter writes events on the status pipe. Write errors are ignored: they mean conch is
// gone, which the guardian learns from the control pipe's EOF and its parent-death signal.
type eventWriter struct{ enc *json.Encoder }

func (w eventWriter) send(ev guardianEvent) { _ = w.enc.Encode(ev) }
