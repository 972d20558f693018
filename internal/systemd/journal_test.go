package systemd

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// devIno returns f's "DEVICE:INODE" as systemd writes JOURNAL_STREAM.
func devIno(t *testing.T, f *os.File) string {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// socketFile returns one end of a unix stream socket pair as an *os.File:
// what a service's stderr is when systemd connects it to the journal.
func socketFile(t *testing.T) *os.File {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "stderr"), os.NewFile(uintptr(fds[1]), "journal")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

// D10: native journal entries only when conch's own stderr is the stream
// JOURNAL_STREAM names (the check itself is go-systemd's); any other writer,
// such as a test's buffer, gets plain lines even with JOURNAL_STREAM set to
// a live stream.
func TestJournalForNeedsOwnStderr(t *testing.T) {
	sock := socketFile(t)
	t.Setenv("JOURNAL_STREAM", devIno(t, sock))
	if JournalFor(sock) != nil {
		t.Error("a socket that is not fd 2: want plain lines")
	}
	if JournalFor(&bytes.Buffer{}) != nil {
		t.Error("a bytes.Buffer is never the journal")
	}
}
