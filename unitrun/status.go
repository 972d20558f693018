package unitrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Shell exit statuses for commands that could not be executed (D3).
const (
	statusNotExecutable = 126
	statusNotFound      = 127
)

// shellStatus converts a wait status into the shell convention (D3): the exit code, or 128+n
// and n when the process died of signal n. It returns -1 for a status that is neither.
func shellStatus(ws syscall.WaitStatus) (int, syscall.Signal) {
	switch {
	case ws.Exited():
		return ws.ExitStatus(), 0
	case ws.Signaled():
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return -1, 0
}

// startFailureStatus maps the error of starting path (relative to dir) to 127 (nothing to
// execute) or 126 (something exists but cannot be executed), as bash does: ENOENT for a file
// that exists means its "#!" interpreter or ELF loader is missing, which is 126.
func startFailureStatus(path, dir string, err error) int {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "chdir" {
		return statusNotExecutable
	}
	if !errors.Is(err, syscall.ENOENT) {
		return statusNotExecutable
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	if _, serr := os.Stat(path); serr == nil {
		return statusNotExecutable
	}
	return statusNotFound
}

// startFailureError wraps msg (the guardian's description of the failure) in ErrNotFound or
// ErrNotExecutable according to status.
func startFailureError(path string, status int, msg string) error {
	sentinel := ErrNotExecutable
	if status == statusNotFound {
		sentinel = ErrNotFound
	}
	return fmt.Errorf("cannot execute %s: %w: %s", path, sentinel, msg)
}
