package etcdconn

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Files read here never block (FIFO), are bounded, and must be regular.
func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, bytes.Repeat([]byte("x"), MaxPasswordFile+1), 0o600)
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("pw\n"), 0o640)
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file (it is a FIFO)"},
		{"/dev/zero", "not a regular file (it is a character device)"},
		{dir, "not a regular file (it is a directory)"},
		{big, "4097 bytes, more than the 4096 allowed"},
		{filepath.Join(dir, "absent"), "no such file"},
	} {
		done := make(chan error, 1)
		go func() {
			_, _, err := ReadBounded(tc.path, "password file", MaxPasswordFile)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadBounded(%s) = %v, want %q", tc.path, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadBounded(%s) blocked", tc.path)
		}
	}
	b, perm, err := ReadBounded(ok, "password file", MaxPasswordFile)
	if err != nil || string(b) != "pw\n" || perm != 0o640 {
		t.Errorf("ReadBounded(ok) = %q, %o, %v", b, perm, err)
	}
}

// /dev/null reads as an empty file (`--config /dev/null` means no config, as the bench and
// many operators write it); other devices stay refused (TestReadBounded).
func TestReadBoundedNullDevice(t *testing.T) {
	b, perm, err := ReadBounded("/dev/null", "config file", MaxPasswordFile)
	if err != nil || len(b) != 0 || perm != 0 {
		t.Fatalf("ReadBounded(/dev/null) = %q, %v, %v; want empty, no permission bits, nil", b, perm, err)
	}
	if _, _, err := ReadBounded("/dev/zero", "config file", MaxPasswordFile); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadBounded(/dev/zero) = %v, want ErrNotRegular", err)
	}
}

// Every TLS file goes through the bounded, non-blocking read.
func TestTLSFilesBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Settings{{CACert: fifo}, {CACert: "/dev/zero"}, {Cert: fifo, Key: fifo}} {
		if _, err := tlsConfig(s, time.Now()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("tlsConfig(%+v) = %v, want a refusal", s, err)
		}
	}
}
