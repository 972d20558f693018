package main

import (
	"os"
	"sync"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/unitrun"
)

// childLogDrain bounds how long conch, once the child's tree is gone, waits for the last of
// the child's output to be relayed to the journal before it exits (childStdio). The child
// and its descendants have closed the pipe by then (D7): only a guardian that is still
// exiting holds it, for milliseconds.
const childLogDrain = 2 * time.Second

// childStdio returns what the child gets as stdin, stdout and stderr (D5): conch's own, except
// that a stdout or stderr that is journald's stream is relayed by conch
// (systemd.RelayJournalStdio). journald attributes each write to its writer's cgroup, so the
// child's output, written into the service's stream from the child's scope, would be logged
// under the scope (a new unit name per holding) as SYSLOG_IDENTIFIER=conch; relayed by conch,
// which stays in the service, it is logged under the service, with the service's
// SyslogIdentifier= or else the command's base name. That holds in direct mode too.
//
// The returned function closes the relays and waits (up to childLogDrain) for the child's
// last lines to be handed to journald; it is called once the child has ended and before
// conch's own line about the slot's release (runEvents), so that `journalctl -u` shows the
// child's last line first, and again (doing nothing more) after the last guardian is closed.
// Relay failures (journald gone: output then goes to conch's own stream, as before) are
// reported with -v through rep.
func childStdio(rep *reporter, command string) (unitrun.Spec, func()) {
	s, err := systemd.RelayJournalStdio(command, os.Stdout, os.Stderr)
	if err != nil {
		rep.line("", true, "cannot relay the command's output to the journal (%v): it writes to conch's own stream", err)
	}
	var once sync.Once
	return unitrun.Spec{Stdin: os.Stdin, Stdout: s.Stdout, Stderr: s.Stderr}, func() {
		once.Do(func() {
			if err := s.Close(childLogDrain); err != nil {
				rep.line("", true, "relaying the command's output to the journal: %v", err)
			}
		})
	}
}
