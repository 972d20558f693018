package etcdconn

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/conch-project/conch/internal/filekind"
)

// Size bounds on the files read here (a password or TLS file that is
// /dev/zero must not grow conch without limit). A password is one
// line; a TLS file one certificate
// chain or CA bundle (the Debian system bundle is ~220 KiB).
const (
	MaxPasswordFile = 4 << 10 // 4 KiB
	maxTLSFile      = 1 << 20 // 1 MiB
)

// ReadBounded reads the regular file at path, at most limit bytes. It never
// blocks on a FIFO or device: the file is opened with O_NONBLOCK and checked
// with fstat on the opened descriptor (so a file swapped after a stat cannot
// slip through) before a byte is read. what names the file in errors ("password
// file"). It returns the content and the file's permission bits. Errors, none of
// which retrying helps: the open's, ErrNotRegular, or a file larger than limit.
// The null device is the one non-regular file accepted: it reads as empty, with no
// permission bits to warn about (a config file of /dev/null is a usual way to say "none").
func ReadBounded(path, what string, limit int64) ([]byte, os.FileMode, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s %s: %w", what, path, err)
	}
	if isNullDevice(fi) { // /dev/null: the usual way to say "no file", read as empty
		return nil, 0, nil
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("cannot read %s %s: %w (it is a %s)", what, path, ErrNotRegular, filekind.Of(fi.Mode()))
	}
	if err := refusePseudoFile(f, path, what); err != nil { // /proc/kmsg is "regular" (pseudofs.go)
		return nil, 0, err
	}
	if fi.Size() > limit {
		return nil, 0, fmt.Errorf("cannot read %s %s: %d bytes, more than the %d allowed", what, path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1)) // the file may grow after fstat
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s %s: %w", what, path, err)
	}
	if int64(len(b)) > limit {
		return nil, 0, fmt.Errorf("cannot read %s %s: more than the %d bytes allowed", what, path, limit)
	}
	return b, fi.Mode().Perm(), nil
}

// isNullDevice reports whether fi is the null device (character device 1:3 on Linux, what
// /dev/null is), which reads as empty and never blocks or grows.
func isNullDevice(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&os.ModeCharDevice != 0 && st.Rdev == 1<<8|3
}

// ReadPassword reads the first line of a password file (bounded, never
// blocking: ReadBounded). warn is non-empty when group or others can read
// the file. Errors: the file cannot be read, is not a regular file, is too
// large, or its first line is empty.
func ReadPassword(path string) (pw, warn string, err error) {
	b, perm, err := ReadBounded(path, "password file", MaxPasswordFile)
	if err != nil {
		return "", "", err
	}
	if perm&0o044 != 0 {
		warn = fmt.Sprintf("password file %s is readable by group or others (mode %04o): chmod 600 it", path, perm)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", warn, fmt.Errorf("password file %s is empty (its first line is the password)", path)
	}
	return line, warn, nil
}
