package unitrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Why a command could not be executed, as the guardian reports it (guardianEvent.Kind of
// evExecError): the caller turns it back into ErrNotFound or ErrNotExecutable. The exit
// status that goes with each (a shell's 127 and 126, D3) is the caller's to choose.
const (
	kindNotFound      = "not-found"
	kindNotExecutable = "not-executable"
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

// startFailureKind classifies the error of starting path (relative to dir) as bash does:
// kindNotFound when there is nothing to execute, kindNotExecutable when something exists but
// cannot be executed (ENOENT for a file that exists means its "#!" interpreter or ELF loader
// is missing, which is the latter, as is a working directory that cannot be entered).
func startFailureKind(path, dir string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "chdir" {
		return kindNotExecutable
	}
	if !errors.Is(err, syscall.ENOENT) {
		return kindNotExecutable
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	if _, serr := os.Stat(path); serr == nil {
		return kindNotExecutable
	}
	return kindNotFound
}

// startFailureError wraps msg (the guardian's description of the failure) in ErrNotFound or
// ErrNotExecutable according to kind (anything but kindNotFound is the latter).
func startFailureError(path, kind, msg string) error {
	sentinel := ErrNotExecutable
	if kind == kindNotFound {
		sentinel = ErrNotFound
	}
	return fmt.Errorf("cannot execute %s: %w: %s", path, sentinel, msg)
}
