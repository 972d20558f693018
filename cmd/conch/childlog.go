package main

import (
	"os"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/unitrun"
	"github.com/coreos/go-systemd/v22/journal"
)

// childLogDrain bounds how long conch, once the child's tree is gone, waits for the last of
// the child's output to be relayed to the journal before it exits (childStdio). The child
// and its descendants have closed the pipe by then (D7): only a guardian that is still
// exiting holds it, for milliseconds.
const childLogDrain = 2 * time.Second

// childStdio returns what the child gets as stdin, stdout and stderr (D5): conch's own,
// except that a stdout or stderr that is journald's stream (go-systemd's
// StdoutIsJournalStream, StderrIsJournalStream: JOURNAL_STREAM names that very socket, as
// systemd sets it for StandardOutput=journal) is replaced by the pipe of a
// systemd.JournalRelay. journald attributes each write to its writer's cgroup, so the
// child's output, written into the service's stream from the child's scope, would be logged
// under the scope (a new unit name per holding) as SYSLOG_IDENTIFIER=conch; relayed by
// conch, which stays in the service, it is logged under the service, with the service's
// SyslogIdentifier= or else the command's base name (systemd.CallerStreamHeader). That holds in direct mode
// too, where the identifier would otherwise be conch's. On a terminal, a pipe or a file
// nothing changes. When stdout and stderr are the same stream (systemd's default,
// StandardError=inherit) they share one relay, so their lines keep their order.
//
// The returned function closes the relays and waits (up to childLogDrain) for the child's
// last lines; call it after the last guardian is closed. Relay failures (journald gone:
// output then goes to conch's own stream, as before) are reported with -v through rep.
func childStdio(rep *reporter, command string) (unitrun.Spec, func()) {
	stdio := unitrun.Spec{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	outJ, _ := journal.StdoutIsJournalStream()
	errJ, _ := journal.StderrIsJournalStream()
	var relays []*systemd.JournalRelay
	relay := func(stderr bool, fallback *os.File) *os.File {
		j, err := systemd.StartJournalRelay(systemd.JournalStreamSocket, systemd.CallerStreamHeader(command, stderr), fallback)
		if err != nil {
			rep.line("", true, "cannot relay the command's output to the journal (%v): it writes to conch's own stream", err)
			return fallback
		}
		relays = append(relays, j)
		return j.File()
	}
	switch {
	case outJ && errJ: // the same socket: JOURNAL_STREAM names one
		stdio.Stdout = relay(false, os.Stdout)
		stdio.Stderr = stdio.Stdout
	case outJ:
		stdio.Stdout = relay(false, os.Stdout)
	case errJ:
		stdio.Stderr = relay(true, os.Stderr)
	}
	return stdio, func() {
		for _, j := range relays {
			if err := j.Close(childLogDrain); err != nil {
				rep.line("", true, "relaying the command's output to the journal: %v", err)
			}
		}
	}
}
