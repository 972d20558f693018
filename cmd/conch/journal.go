package main

import (
	"io"
	"os"
	"strconv"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/sema"
	"github.com/coreos/go-systemd/v22/journal"
)

// journalIdentifier is SYSLOG_IDENTIFIER of conch's native journal entries,
// so `journalctl -t conch` and `systemctl status` name them like the
// plain lines journald would otherwise have recorded.
const journalIdentifier = "conch"

// journalFunc sends one native journal entry (go-systemd's journal.Send):
// MESSAGE, PRIORITY and extra fields. A nil journalFunc means conch writes
// plain lines instead (D10).
type journalFunc func(message string, priority journal.Priority, fields map[string]string) error

// journalFor returns journal.Send when stderr is the process's own stderr
// and that is the journal's stream socket (D10: go-systemd's
// StderrIsJournalStream compares JOURNAL_STREAM's device and inode with
// fd 2), else nil. Only then are native entries right: when stderr was
// redirected (to a file, a pipe, a terminal) the operator reads stderr, not
// the journal, even if JOURNAL_STREAM was inherited.
func journalFor(stderr io.Writer) journalFunc {
	if stderr != io.Writer(os.Stderr) {
		return nil
	}
	if ok, err := journal.StderrIsJournalStream(); err != nil || !ok {
		return nil
	}
	return journal.Send
}

// unitFields name the unit conch runs in, for its journal entries. journald
// attaches _SYSTEMD_UNIT itself, but from /proc at the time it reads the
// entry: conch's last entry (TIMEOUT just before exit 75, for one) often
// arrives after conch is gone, and would then be missing from `journalctl
// -u` and `systemctl status`. journalctl -u also matches
// OBJECT_SYSTEMD_UNIT= sent by root, and --user-unit matches USER_UNIT=
// sent by the unit's user, so conch names its unit that way (as read by
// systemd.ReadPlacement). It returns nil when conch is in no unit.
func unitFields() map[string]string {
	user := os.Geteuid() != 0
	p, err := systemd.ReadPlacement(0, user)
	if err != nil || p.Unit == "" {
		return nil
	}
	if user {
		return map[string]string{"USER_UNIT": p.Unit}
	}
	return map[string]string{"OBJECT_SYSTEMD_UNIT": p.Unit}
}

// journalFields are the fields of one of conch's entries (D10): CONCH_SEMA
// and CONCH_MAX once known, CONCH_REV once the key exists, CONCH_STATE on
// transitions, plus what the state adds (CONCH_AHEAD while waiting,
// CONCH_EXIT_STATUS on release).
func (r *reporter) journalFields(state string, extra map[string]string) map[string]string {
	f := map[string]string{"SYSLOG_IDENTIFIER": journalIdentifier}
	if r.name != "" { // "" for a usage error before the name was read
		f["CONCH_SEMA"] = r.name
	}
	if r.max != 0 { // 0 for --who without --max
		f["CONCH_MAX"] = strconv.Itoa(r.max)
	}
	if r.rev != 0 {
		f["CONCH_REV"] = strconv.FormatInt(r.rev, 10)
	}
	if r.lease != 0 {
		f["CONCH_LEASE"] = sema.FormatLeaseID(r.lease)
	}
	if state != "" {
		f["CONCH_STATE"] = state
	}
	for k, v := range r.unit {
		f[k] = v
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}
