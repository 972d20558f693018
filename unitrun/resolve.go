package unitrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Resolve finds the command name the way a shell does, with exec.LookPath's rules: a name
// containing "/" is used as is, any other name is searched in $PATH (an empty entry means the
// current directory, as in sh). It returns the path to execute; a path found through a relative
// $PATH entry is returned relative, as the shell would run it (exec.ErrDot is not an error here).
//
// Errors, wrapped with the name: ErrNotFound when nothing of that name exists (the caller exits
// 127, D3); ErrNotExecutable when a file exists but cannot be executed, e.g. no execute
// permission or a directory (126, D3). Like bash, a non-executable file met in $PATH when no
// executable one exists gives ErrNotExecutable rather than ErrNotFound.
//
// Resolve only reads the file system; cmd/conch calls it before any etcd call so that a typo
// fails fast. It does not block otherwise.
func Resolve(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty command name", ErrNotFound)
	}
	path, err := exec.LookPath(name)
	if err == nil || errors.Is(err, exec.ErrDot) && path != "" {
		return path, nil
	}
	if !strings.Contains(name, "/") {
		if found := firstFileInPath(name); found != "" {
			return "", fmt.Errorf("%s: %w: %s is not an executable file", name, ErrNotExecutable, found)
		}
		return "", fmt.Errorf("%s: %w in $PATH", name, ErrNotFound)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	return "", fmt.Errorf("%s: %w: %v", name, ErrNotExecutable, unwrapExecError(err))
}

// firstFileInPath returns the first existing entry called name in $PATH, or "" if none. Used
// only after LookPath failed, to tell "not executable" (126) from "not found" (127) as bash does.
func firstFileInPath(name string) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// unwrapExecError strips exec.Error's own prefix so messages do not repeat the name.
func unwrapExecError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
