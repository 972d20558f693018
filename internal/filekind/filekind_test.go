package filekind

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Of names each kind of file as the refusals show it, read from the file system itself.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	fifo, link, sock := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "sock")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "FIFO", link: "symbolic link", sock: "socket", dir: "directory", "/dev/null": "character device"} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := Of(fi.Mode()); got != want {
			t.Errorf("%s (%v): %q, want %q", path, fi.Mode(), got, want)
		}
	}
	for m, want := range map[fs.FileMode]string{fs.ModeDevice: "block device", fs.ModeIrregular: "special file"} {
		if got := Of(m); got != want {
			t.Errorf("mode %v: %q, want %q", m, got, want)
		}
	}
}
