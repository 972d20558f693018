package systemd

import (
	"os"
	"testing"
)

// D10a: a backslash in a notify message's value reaches systemd doubled, so that its word
// extraction leaves one.
func TestNotifyEscape(t *testing.T) {
	for in, want := range map[string]string{
		"STATUS=plain":                   "STATUS=plain",
		`STATUS=in conch-x\x2dy-1.scope`: `STATUS=in conch-x\\x2dy-1.scope`,
		`a\\b`:                           `a\\\\b`,
	} {
		if got := NotifyEscape(in); got != want {
			t.Errorf("NotifyEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

// D5: off journald (a terminal, a pipe, a file: as under go test), the command gets the
// caller's stdout and stderr as they are and no relay runs.
func TestRelayJournalStdioOffJournal(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	s, err := RelayJournalStdio("/usr/bin/batch-worker", os.Stdout, os.Stderr)
	if err != nil || s.Stdout != os.Stdout || s.Stderr != os.Stderr || len(s.relays) != 0 {
		t.Fatalf("RelayJournalStdio = %v %v (%d relays), %v; want the caller's own, no relay", s.Stdout, s.Stderr, len(s.relays), err)
	}
	if err := s.Close(generousTimeout); err != nil {
		t.Fatalf("Close without relays: %v", err)
	}
}
