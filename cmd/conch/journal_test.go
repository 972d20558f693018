package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// D10: native journal entries only when stderr is the stream JOURNAL_STREAM
// names; a JOURNAL_STREAM inherited by a process whose stderr was redirected
// must not hide its messages in the journal.
func TestIsJournalStream(t *testing.T) {
	sock := socketFile(t)
	other := socketFile(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	closed, _ := os.Open(os.DevNull)
	closed.Close()

	for _, tc := range []struct {
		name  string
		value string
		f     *os.File
		want  bool
	}{
		{"socket named by JOURNAL_STREAM", devIno(t, sock), sock, true},
		{"file named by JOURNAL_STREAM", devIno(t, file), file, true},
		{"unset", "", sock, false},
		{"another socket (stderr redirected)", devIno(t, other), sock, false},
		{"same device, other inode", strings.Split(devIno(t, sock), ":")[0] + ":1", sock, false},
		{"malformed: no colon", "12345", sock, false},
		{"malformed: words", "dev:ino", sock, false},
		{"malformed: negative", "-1:-1", sock, false},
		{"malformed: trailing junk", devIno(t, sock) + "x", sock, false},
		{"closed file", devIno(t, sock), closed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isJournalStream(tc.value, tc.f); got != tc.want {
				t.Fatalf("isJournalStream(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func TestJournalForNeedsAnOSFile(t *testing.T) {
	sock := socketFile(t)
	env := func(k string) string {
		if k == "JOURNAL_STREAM" {
			return devIno(t, sock)
		}
		return ""
	}
	if journalFor(sock, env) == nil {
		t.Error("stderr is the journal stream: want native logging")
	}
	if journalFor(&bytes.Buffer{}, env) != nil {
		t.Error("a bytes.Buffer is never the journal")
	}
	if journalFor(sock, func(string) string { return "" }) != nil {
		t.Error("no JOURNAL_STREAM: want plain lines")
	}
}
