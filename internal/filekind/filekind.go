// Package filekind names what a file that is not a regular one is, for the messages that
// refuse such a path (a --textfile that is a device or a link, a config file that is a
// FIFO). It is a leaf: it imports no package of the module.
package filekind

import "io/fs"

// Of returns what the file of mode m is when it is not a regular file: "symbolic link",
// "character device", "block device", "FIFO", "socket", "directory", or "special file" for
// any other kind (and for a regular file, which callers do not ask about).
func Of(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
