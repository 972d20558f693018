package unitrun

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procEntry identifies one process: its start time (clock ticks since boot) tells it apart
// from a later process that reuses the PID.
type procEntry struct {
	pid, ppid int
	state     byte // R, S, D, Z, ...
	start     uint64
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procEntry, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, err
	}
	return parseProcStat(data)
}

// parseProcStat parses the content of /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so the fields are counted from
// the last ')'.
func parseProcStat(data []byte) (procEntry, error) {
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return procEntry{}, fmt.Errorf("malformed stat line %q", data)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return procEntry{}, fmt.Errorf("malformed pid in stat line %q", data)
	}
	// After ")": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(data[closing+1:]))
	if len(rest) < 20 {
		return procEntry{}, fmt.Errorf("short stat line %q", data)
	}
	ppid, err1 := strconv.Atoi(rest[1])
	start, err2 := strconv.ParseUint(rest[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procEntry{}, fmt.Errorf("malformed stat line %q", data)
	}
	return procEntry{pid: pid, ppid: ppid, state: rest[0][0], start: start}, nil
}

// listProcs returns every process in /proc that could be read (descendants' fallback); processes that vanish while
// it reads are skipped.
func listProcs() ([]procEntry, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make([]procEntry, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, err := readProcStat(pid); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// descendantsOf returns the descendants of root in procs (root excluded), parents first.
func descendantsOf(root int, procs []procEntry) []procEntry {
	children := make(map[int][]procEntry)
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procEntry
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if c.pid == root { // cannot happen in a consistent snapshot; guard against loops
				continue
			}
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// signalDescendants sends sig to every current descendant of the calling process (see
// descendants). Processes that are gone by the time the signal is sent are skipped silently.
func signalDescendants(sig syscall.Signal) error {
	procs, err := descendants()
	if err != nil {
		return fmt.Errorf("cannot list processes: %w", err)
	}
	var firstErr error
	for _, p := range procs {
		if err := signalProc(p, sig); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// hasChildren reports whether the calling process has any child, a zombie or a clone child
// included. As a child subreaper, a process without children has no descendant at all: an
// orphan is reparented to its subreaper before its parent's exit can be reaped. It is one
// waitid(2) with WNOWAIT, so no status is consumed; on any error but ECHILD it says true.
func hasChildren() bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return !errors.Is(err, unix.ECHILD)
	}
}

// descendants returns the calling process's descendants, parents first. It follows the
// kernel's children lists (/proc/PID/task/TID/children) down from the calling process, which
// costs a few reads per descendant, whatever runs on the host; without them (a kernel built
// without CONFIG_PROC_CHILDREN) it reads every process in /proc. A process found in a
// children list is kept only if its parent, read from its stat afterwards, is in the tree
// found so far, so a PID reused meanwhile by an unrelated process is left out; a process
// forked during the walk may be missed (callers walk again).
func descendants() ([]procEntry, error) {
	return descendantsExcept(nil)
}

// descendantsExcept is descendants without the processes in skip and their own descendants.
func descendantsExcept(skip map[int]bool) ([]procEntry, error) {
	self := os.Getpid()
	queue, err := childrenOf(self)
	if err != nil {
		procs, err := listProcs()
		if err != nil {
			return nil, err
		}
		kept := procs[:0]
		for _, p := range procs {
			if !skip[p.pid] { // their children then hang from no member of the tree
				kept = append(kept, p)
			}
		}
		return descendantsOf(self, kept), nil
	}
	tree := map[int]bool{self: true}
	var out []procEntry
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if tree[pid] || skip[pid] {
			continue
		}
		p, err := readProcStat(pid)
		if err != nil || !tree[p.ppid] {
			continue // gone, or the PID now names a process outside the tree
		}
		tree[pid] = true
		out = append(out, p)
		kids, _ := childrenOf(pid) // gone meanwhile: its children are reparented to a member
		queue = append(queue, kids...)
	}
	return out, nil
}

// childrenOf returns the PIDs in the children lists of every thread of pid. The error is
// that of the first list that could not be read; a process that has just exited has none.
func childrenOf(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	tids, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		data, err := os.ReadFile(dir + tid + "/children")
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(dir + tid); serr == nil {
				return nil, err // the thread exists but has no children list: not supported
			}
			continue // the thread has exited meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// signalProc sends sig to p unless p has ended meanwhile. It opens a pidfd first, which pins
// the process, then checks the start time: a PID reused by an unrelated process is never
// signalled. Without pidfd support (Linux < 5.3) it falls back to kill(2).
func signalProc(p procEntry, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return ignoreESRCH(unix.Kill(p.pid, sig))
	}
	if err != nil {
		return ignoreESRCH(err)
	}
	defer func() { _ = unix.Close(fd) }()
	if now, err := readProcStat(p.pid); err != nil || now.start != p.start {
		return nil // gone, or the PID now names another process
	}
	return ignoreESRCH(unix.PidfdSendSignal(fd, sig, nil, 0))
}

// signalGroup sends sig to process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error {
	return ignoreESRCH(unix.Kill(-pgid, sig))
}

func ignoreESRCH(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}
