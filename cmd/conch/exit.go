package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/unitrun"
)

// The exit statuses conch chooses (D3). exitStatus is the one place that picks among them;
// exitRows says what each means, for --help, the man page and the manual (docs/exit-status.md).
const (
	exitOK          = 0
	exitEmpty       = 1   // --who: the semaphore has no holder
	exitUsage       = 64  // EX_USAGE: bad flags or arguments (nothing written to etcd), or etcd refused us
	exitUnavailable = 69  // EX_UNAVAILABLE: etcd unreachable, or a required scope could not be made
	exitSlotLost    = 70  // the slot, or the child's guardian, was lost while the child ran; the child was stopped
	exitSoftware    = 70  // EX_SOFTWARE: --who could not write its listing (it holds no slot to lose)
	exitConflict    = 75  // EX_TEMPFAIL: no slot within --wait / --nonblock (-E N replaces it)
	exitRuntimeMax  = 124 // the child ran past --runtime-max (timeout(1))
	exitCannotExec  = 126 // the command exists but cannot be executed (shell convention)
	exitNotFound    = 127 // the command is not found (shell convention)
)

// What ended a run, as the stage that found it says it (restic's exit errors are the
// model): each is mapped to its status by exitStatus, and by nothing else. The errors of
// other packages that exitStatus maps too: etcdconn.ErrUnreachable, unitrun.ErrNotFound and
// unitrun.ErrNotExecutable.
var (
	errUsage       = errors.New("usage")          // a flag, argument or setting conch cannot use, or etcd refused us
	errUnavailable = errors.New("unavailable")    // etcd did not answer, or a required scope was not made
	errNoSlot      = errors.New("no slot")        // no slot within --wait or --nonblock; etcd answered
	errSlotLost    = errors.New("slot lost")      // the slot or the child's guardian was lost while the child ran
	errRuntimeMax  = errors.New("run-time limit") // the child ran past its limit and was stopped
	errEmpty       = errors.New("no holder")      // --who: nobody holds the semaphore
	// errWhoOutput: --who could not render or write its listing (stdout closed, disk full):
	// said, with EX_SOFTWARE's 70, so that a script never takes an empty or cut document
	// for "no holder"; --who holds no slot, so it cannot mean D3's "slot lost"
	errWhoOutput = errors.New("listing not written")
	// errNotHeld: --held found that the slot this process was given is not held at its
	// read: the same 70 as a slot lost while the child runs (D3)
	errNotHeld = errors.New("slot not held")
)

// exitRow is one row of the exit-status table: the status as shown, and what it means, in
// Markdown (docs/exit-status.md's table holds these rows as they are; --help and the man page
// drop the backquotes).
type exitRow struct{ status, meaning string }

// exitRows is the exit-status table (D3): the one text of it, which --help, the man page
// and docs/exit-status.md show (TestExitTableOneSource).
var exitRows = []exitRow{
	{"child's status", "the child ran; 128+n if it died of signal n"},
	{"75 (or `-E N`)", "no slot within `--wait`, or `--nonblock` found none; the child never started and our key is gone"},
	{"64", "bad flags or arguments (nothing was written to etcd), a config, password or TLS file conch cannot use (unreadable, not a regular file, malformed), or etcd refused a request for good (permission denied, bad credentials, a TTL it does not grant), or TLS is misconfigured for good (wrong CA, expired or missing client certificate, wrong host name, a CA file without certificates; said at once, with the x509 reason): retrying cannot help"},
	{"69", "etcd unreachable (no answer within `--dial-timeout` at start, or `--wait` ran out during an outage: `--wait D` returns within D + 1 s), or a scope required by `--scope=always`, `-p` or `--slice` could not be made (e.g. no systemd)"},
	{"70", "the slot was lost while the child ran (lease lost, key deleted, lease not confirmable), or conch lost the child's guardian while it ran (its status is unknown); the child was stopped"},
	{"124", "the child ran past `--runtime-max` and was stopped"},
	{"126 / 127", "the command cannot be executed / is not found"},
	{"killed by signal n", `conch got SIGTERM, SIGINT, SIGHUP or SIGQUIT: it stopped the child (or left the queue), released the slot and re-raised the signal; or, in a terminal, the child died of Ctrl-C's SIGINT or Ctrl-\\'s SIGQUIT: conch released and died of it too, with its process group; a calling bash script stops after Ctrl-C (after Ctrl-\\ it goes on: bash's rule)`},
	{"`--who`", "0 if any holder, 1 if empty, 69 if etcd is unreachable, 64 if it refuses the read, 70 if the listing cannot be written (`/dev/full`, a closed pipe)"},
	{"`--held`", "0 if the slot is held, 70 if not (with the reason), 64 outside a command run by conch, 69 if etcd is unreachable"},
	{"`--who --watch`", "killed by the signal that ends it (Ctrl-C: SIGINT); 0 when its reader goes away; 69 or 64 if the first read fails; 70 if the listing cannot be written"},
}

// exitTable is exitRows as --help shows it (the man page renders exitRows, manExitStatus): a
// status indented by two spaces, its meaning from column 18, wrapped at 80 columns.
var exitTable = renderExitTable(exitRows)

// renderExitTable lays rows out as exitTable says.
func renderExitTable(rows []exitRow) string {
	const indent, width = 18, 80
	var b strings.Builder
	b.WriteString("Exit status:")
	for _, r := range rows {
		line := "  " + plainText(r.status)
		line += strings.Repeat(" ", max(2, indent-len(line)))
		fresh := true // nothing of the meaning on line yet
		for _, w := range strings.Fields(plainText(r.meaning)) {
			if !fresh && len(line)+1+len(w) > width {
				b.WriteString("\n" + line)
				line, fresh = strings.Repeat(" ", indent), true
			}
			if !fresh {
				line += " "
			}
			line, fresh = line+w, false
		}
		b.WriteString("\n" + line)
	}
	return b.String()
}

// plainText is Markdown text without its backquotes and backslash escapes.
func plainText(md string) string {
	return strings.ReplaceAll(strings.ReplaceAll(md, "`", ""), `\\`, `\`)
}

// exitError is how a stage of a run says how conch must end (restic's ExitError is the
// model): what ended it (kind: one of the errors above, or another package's that
// exitStatus maps; nil for the child's own status), or a signal to re-raise (D3), with the
// one line that says why and its journal state (D10). The stage that knows the failure
// builds it; exitStatus reads it and report prints its line.
type exitError struct {
	kind error // what ended the run; nil: the child's own status (own)
	// own is a status that neither the table nor conch chose: the child's (kind nil), or
	// the operator's -E status for errNoSlot
	own   int
	sig   syscall.Signal // re-raise this signal after cleaning up (D3)
	group bool           // re-raise it to conch's process group (see reraise)
	state string         // CONCH_STATE of the line (D10); "" for none
	msg   string         // the line, without "conch: <name>[max=N]: "; "" for none
}

func (e *exitError) Error() string {
	if e.msg == "" && e.kind != nil {
		return e.kind.Error()
	}
	return e.msg
}

// Unwrap is what ended the run, for errors.Is.
func (e *exitError) Unwrap() error { return e.kind }

// endf is an end of kind with the line format says, in journal state state.
func endf(kind error, state, format string, args ...any) error {
	return &exitError{kind: kind, state: state, msg: fmt.Sprintf(format, args...)}
}

// silent is an end of kind whose line is already written, or needs none.
func silent(kind error) error { return &exitError{kind: kind} }

// childExit is the child's own status, said by no line (D3); nil for 0.
func childExit(status int) error {
	if status == exitOK {
		return nil
	}
	return &exitError{own: status}
}

// noSlot is the end of a wait that got no slot while etcd answered: status is the -E
// status, the line is what format says (none when it is "").
func noSlot(status int, format string, args ...any) error {
	e := &exitError{kind: errNoSlot, own: status}
	if format != "" {
		e.state, e.msg = stateTimeout, fmt.Sprintf(format, args...)
	}
	return e
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
// signal to re-raise. It is the one function that decides an exit status (restic's
// ComputeExitCode is the model): nil is 0; a signal is re-raised; each kind of end has its
// row of exitRows; the child's own status is its own; any other error is a setting conch
// cannot use (a usage error, bad TLS files, a refused login, a name or capacity sema
// refuses): 64, nothing was written to etcd.
func exitStatus(err error) (int, syscall.Signal) {
	var xe *exitError
	errors.As(err, &xe)
	switch {
	case err == nil:
		return exitOK, 0
	case xe != nil && xe.sig != 0:
		return 0, xe.sig
	case errors.Is(err, errNoSlot):
		return xe.own, 0
	case errors.Is(err, errEmpty):
		return exitEmpty, 0
	case errors.Is(err, errSlotLost), errors.Is(err, errNotHeld):
		return exitSlotLost, 0
	case errors.Is(err, errWhoOutput):
		return exitSoftware, 0
	case errors.Is(err, errRuntimeMax):
		return exitRuntimeMax, 0
	case errors.Is(err, unitrun.ErrNotFound):
		return exitNotFound, 0
	case errors.Is(err, unitrun.ErrNotExecutable):
		return exitCannotExec, 0
	case errors.Is(err, errUnavailable), errors.Is(err, etcdconn.ErrUnreachable):
		return exitUnavailable, 0
	case xe != nil && xe.kind == nil:
		return xe.own, 0
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
