package systemd

import (
	"errors"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// JournalStdio is a command's stdout and stderr, with journald's stream replaced by the pipe
// of a JournalRelay where the caller's own stdout or stderr is that stream (RelayJournalStdio).
type JournalStdio struct {
	Stdout, Stderr *os.File
	relays         []*JournalRelay
}

// RelayJournalStdio returns the stdout and stderr to give the command at path in place of
// stdout and stderr, the caller's own: one that is journald's stream (go-systemd's
// StdoutIsJournalStream, StderrIsJournalStream: JOURNAL_STREAM names that very socket, as
// systemd sets it for StandardOutput=journal) is replaced by the pipe of a JournalRelay whose
// header is CallerStreamHeader's, so that the command's output is logged as the caller's
// unit, not as the scope the command runs in. When both are the same stream (systemd's
// default, StandardError=inherit) they share one relay, so their lines keep their order. On a
// terminal, a pipe or a file nothing changes. A relay that cannot be started leaves its
// stream as it was and its error is returned beside a usable result. Close ends the relays.
func RelayJournalStdio(path string, stdout, stderr *os.File) (*JournalStdio, error) {
	s := &JournalStdio{Stdout: stdout, Stderr: stderr}
	outJ, _ := journal.StdoutIsJournalStream()
	errJ, _ := journal.StderrIsJournalStream()
	var err error
	switch {
	case outJ && errJ: // the same socket: JOURNAL_STREAM names one
		s.Stdout, err = s.relay(path, false, stdout)
		s.Stderr = s.Stdout
	case outJ:
		s.Stdout, err = s.relay(path, false, stdout)
	case errJ:
		s.Stderr, err = s.relay(path, true, stderr)
	}
	return s, err
}

// relay starts a relay for the command's stdout (or stderr) and returns its pipe, or fallback
// and the error when it cannot be started.
func (s *JournalStdio) relay(path string, stderr bool, fallback *os.File) (*os.File, error) {
	j, err := StartJournalRelay(JournalStreamSocket, CallerStreamHeader(path, stderr), fallback)
	if err != nil {
		return fallback, err
	}
	s.relays = append(s.relays, j)
	return j.File(), nil
}

// Close closes the relays (JournalRelay.Close, waiting up to drain for each) and returns why
// any fell back to the caller's own stream, joined; nil if none did. Call it after the command
// and its guardian are gone.
func (s *JournalStdio) Close(drain time.Duration) error {
	var errs []error
	for _, j := range s.relays {
		errs = append(errs, j.Close(drain))
	}
	return errors.Join(errs...)
}
