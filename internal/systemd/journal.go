package systemd

import (
	"io"
	"os"

	"github.com/coreos/go-systemd/v22/journal"
)

// JournalSend sends one native journal entry (go-systemd's journal.Send): MESSAGE, PRIORITY
// and extra fields (field name to value). It returns journald's error when the entry cannot be
// sent. A nil JournalSend means the caller writes plain lines instead (D10).
type JournalSend func(message string, priority journal.Priority, fields map[string]string) error

// JournalFor returns journal.Send when stderr is the process's own stderr
// and that is the journal's stream socket (D10: go-systemd's
// StderrIsJournalStream compares JOURNAL_STREAM's device and inode with
// fd 2), else nil. Only then are native entries right: when stderr was
// redirected (to a file, a pipe, a terminal) the operator reads stderr, not
// the journal, even if JOURNAL_STREAM was inherited.
func JournalFor(stderr io.Writer) JournalSend {
	if stderr != io.Writer(os.Stderr) {
		return nil
	}
	if ok, err := journal.StderrIsJournalStream(); err != nil || !ok {
		return nil
	}
	return journal.Send
}

// UnitFields are the journal fields that name the unit the calling process runs in, for its
// native entries (D10). journald attaches _SYSTEMD_UNIT itself, but from /proc at the time it
// reads the entry: a process's last entry (conch's TIMEOUT just before its exit, for one)
// often arrives after the process is gone, and would then be missing from `journalctl -u` and
// `systemctl status`. journalctl -u also matches OBJECT_SYSTEMD_UNIT= sent by root, and
// --user-unit matches USER_UNIT= sent by the unit's user, so the unit is named that way (as
// read by ReadPlacement). It returns nil when the process is in no unit or its placement
// cannot be read.
func UnitFields() map[string]string {
	user := os.Geteuid() != 0
	p, err := ReadPlacement(0, user)
	if err != nil || p.Unit == "" {
		return nil
	}
	if user {
		return map[string]string{"USER_UNIT": p.Unit}
	}
	return map[string]string{"OBJECT_SYSTEMD_UNIT": p.Unit}
}
