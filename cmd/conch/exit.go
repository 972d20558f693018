package main

import (
	"errors"
	"fmt"
	"syscall"
)

// The one exit-status table (D3). Nothing below main exits.
const (
	exitOK          = 0
	exitEmpty       = 1   // --who: the semaphore has no holder
	exitUsage       = 64  // EX_USAGE: bad flags or arguments (nothing written to etcd), or etcd refused us
	exitUnavailable = 69  // EX_UNAVAILABLE: etcd unreachable, or a required scope could not be made
	exitSlotLost    = 70  // the slot, or the child's guardian, was lost while the child ran; the child was stopped
	exitConflict    = 75  // EX_TEMPFAIL: no slot within --wait / --nonblock (or -E N)
	exitRuntimeMax  = 124 // the child ran past --runtime-max (timeout(1))
	exitCannotExec  = 126 // the command exists but cannot be executed
	exitNotFound    = 127 // the command is not found
)

const exitTable = `Exit status:
  child's status  the child ran; 128+n if it died of signal n
  75              no slot within --wait, or --nonblock found none (-E N changes it);
                  the child never started and our key is gone
  64              bad flags or arguments (nothing was written to etcd), or etcd
                  refused a request for good (permission denied, bad credentials,
                  a TTL it does not grant), or TLS is misconfigured for good (wrong
                  CA, expired or missing client certificate, wrong host name, a CA
                  file without certificates; said at once, with the x509 reason):
                  retrying cannot help
  69              etcd unreachable (no answer within --dial-timeout at start, or
                  --wait ran out during an outage: --wait D returns within D + 1 s),
                  or a scope required by --scope=always, -p or --slice could not
                  be made (e.g. no systemd)
  70              the slot was lost while the child ran (lease lost, key deleted,
                  lease not confirmable), or conch lost the child's guardian while
                  it ran (its status is unknown); the child was stopped
  124             the child ran past --runtime-max and was stopped
  126 / 127       the command cannot be executed / is not found
  killed by n     conch got SIGTERM, SIGINT or SIGHUP: it stopped the child,
                  released the slot and re-raised the signal; or, in a terminal, the
                  child died of Ctrl-C's SIGINT or Ctrl-\'s SIGQUIT: conch released
                  and died of it too, with its process group; a calling bash script
                  stops after Ctrl-C (after Ctrl-\ it goes on: bash's rule)
  --who:          0 if any holder, 1 if empty, 69 if etcd is unreachable,
                  64 if it refuses the read, 70 if the listing cannot be
                  written (/dev/full, a closed pipe)
  --held:         0 if the slot is held, 70 if not (with the reason), 64
                  outside a command run by conch, 69 if etcd is unreachable
  --who --watch:  killed by the signal that ends it (Ctrl-C: SIGINT); 0 when
                  its reader goes away; 69/64 if the first read fails; 70 if
                  the listing cannot be written`

// exitError is how a stage of a run says how conch must end (restic's ExitError is the
// model): the exit status of the table above, or a signal to re-raise (D3), with the one
// line that says why and its journal state (D10). The stage that knows the failure builds
// it; exitStatus reads it and report prints its line.
type exitError struct {
	status int            // exit status (D3); unused when sig is set
	sig    syscall.Signal // re-raise this signal after cleaning up (D3)
	group  bool           // re-raise it to conch's process group (see reraise)
	state  string         // CONCH_STATE of the line (D10); "" for none
	msg    string         // the line, without "conch: <name>[max=N]: "; "" for none
}

func (e *exitError) Error() string { return e.msg }

// exitCode is a silent exit with status: the child's own (D3), or one whose line is
// already written.
func exitCode(status int) error {
	if status == exitOK {
		return nil
	}
	return &exitError{status: status}
}

// exitf is an exit with status and the line format says, in journal state state.
func exitf(status int, state, format string, args ...any) error {
	return &exitError{status: status, state: state, msg: fmt.Sprintf(format, args...)}
}

// signalExit is a death by sig after cleaning up (D3), with the line format says (none when
// format is "").
func signalExit(sig syscall.Signal, state, format string, args ...any) error {
	e := &exitError{sig: sig, state: state}
	if format != "" {
		e.msg = fmt.Sprintf(format, args...)
	}
	return e
}

// exitStatus maps the error a run ended with to conch's exit (D3): the exit status, or the
// signal to re-raise. It is the one function that decides every exit status: nil is 0; an
// *exitError says its own; etcd not answering a new client (errUnreachable) is 69; any
// other error is a setting conch cannot use (a usage error, bad TLS files, a refused login,
// a name or capacity sema refuses): 64, nothing was written to etcd.
func exitStatus(err error) (int, syscall.Signal) {
	var xe *exitError
	switch {
	case err == nil:
		return exitOK, 0
	case errors.As(err, &xe):
		if xe.sig != 0 {
			return 0, xe.sig
		}
		return xe.status, 0
	case errors.Is(err, errUnreachable):
		return exitUnavailable, 0
	}
	return exitUsage, 0
}

// signalsGroup reports whether the signal exitStatus gives for err goes to conch's whole
// process group: a Ctrl-C or Ctrl-\ that only the child got, in the terminal's foreground.
func signalsGroup(err error) bool {
	var xe *exitError
	return errors.As(err, &xe) && xe.sig != 0 && xe.group
}

// report writes the one line of err through rep, with its journal state (D10): an
// *exitError's own line, if any, or any other error's text. It is the only place that
// writes why conch ends, and the caller exits with exitStatus(err).
func report(rep *reporter, err error) {
	var xe *exitError
	switch {
	case err == nil:
	case errors.As(err, &xe):
		if xe.msg != "" {
			rep.errorf(xe.state, "%s", xe.msg)
		}
	default:
		rep.errorf("", "%v", err)
	}
}
