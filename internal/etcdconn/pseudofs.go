package etcdconn

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// pseudoFilesystems are the kernel's file systems whose files fstat calls regular but which
// are no files an operator writes: reading one may block (/proc/kmsg waits for the kernel's
// next message, even with O_NONBLOCK on older kernels) or take something from the kernel
// (/proc/kmsg's reader consumes the log). conch refuses them before it reads a byte.
var pseudoFilesystems = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "proc",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	0x62656570:               "configfs", // CONFIGFS_MAGIC, which x/sys/unix lacks
	unix.EFIVARFS_MAGIC:      "efivarfs",
	unix.BPF_FS_MAGIC:        "bpf",
	unix.PSTOREFS_MAGIC:      "pstore",
}

// refusePseudoFile returns an error (wrapping ErrNotRegular) when f, opened from path, lies
// on a kernel pseudo file system (pseudoFilesystems) or path names one under /proc, /sys or
// /dev; nil for any other file. It reads nothing from f: fstatfs(2) on the open descriptor.
// what names the file in the error ("config file"). The rule is D9a's.
func refusePseudoFile(f *os.File, path, what string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("cannot read %s %s: %w", what, path, err)
	}
	if fs, ok := pseudoFilesystems[int64(st.Type)]; ok {
		return fmt.Errorf("cannot read %s %s: %w (it is a file of the kernel's %s file system)", what, path, ErrNotRegular, fs)
	}
	for _, dir := range []string{"/proc/", "/sys/"} {
		if strings.HasPrefix(path, dir) {
			return fmt.Errorf("cannot read %s %s: %w (it is under %s)", what, path, ErrNotRegular, dir)
		}
	}
	return nil
}
