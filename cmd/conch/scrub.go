package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// scrubSecrets overwrites with '*', in this process's own memory, the etcd passwords that
// /proc/PID/environ and /proc/PID/cmdline show to every process of the same user (a child
// that runs as conch's user among them) and ps shows to every user: the value of
// ETCDCTL_PASSWORD, the PASSWORD of ETCDCTL_USER or CONCH_USER NAME:PASSWORD, and of
// --user NAME:PASSWORD (or --user=NAME:PASSWORD) in argv. The child never inherits them
// (D5a); this hides them from conch's own /proc entries once conch has started (ps may have
// caught argv before). Lengths are kept. Go's copy of the environment (os.Getenv) is not
// touched; but os.Args' strings point into argv's memory, so the caller must have copied
// what it needs of argv first (cloneArgs). Best effort: where /proc/self/mem cannot be
// written, nothing changes.
func scrubSecrets() {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	// fields after the command's closing parenthesis start at field 3; arg_start..env_end
	// are fields 48-51 (proc(5))
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 49 {
		return
	}
	var addr [4]int64
	for k := range addr {
		if addr[k], err = strconv.ParseInt(f[45+k], 10, 64); err != nil || addr[k] <= 0 {
			return
		}
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer mem.Close()
	scrubRegion(mem, addr[0], addr[1], secretsInArgs)
	scrubRegion(mem, addr[2], addr[3], secretsInEnv)
}

// scrubRegion reads the NUL-separated strings of memory [start, end), has spans say which
// byte ranges of them are secret, and overwrites those with '*'.
func scrubRegion(mem *os.File, start, end int64, spans func([][]byte) [][2]int) {
	if end <= start || end-start > 1<<22 {
		return
	}
	buf := make([]byte, end-start)
	if n, err := mem.ReadAt(buf, start); err != nil || int64(n) != end-start {
		return
	}
	for _, sp := range spans(bytes.Split(buf, []byte{0})) {
		_, _ = mem.WriteAt(bytes.Repeat([]byte{'*'}, sp[1]-sp[0]), start+int64(sp[0]))
	}
}

// secretsInEnv returns the byte ranges (offsets into the region the entries were split from,
// NUL separators counted) of the passwords among environment entries.
func secretsInEnv(entries [][]byte) [][2]int {
	var out [][2]int
	off := 0
	for _, e := range entries {
		k, v, ok := bytes.Cut(e, []byte{'='})
		switch key := string(k); {
		case !ok:
		case key == "ETCDCTL_PASSWORD" && len(v) > 0:
			out = append(out, [2]int{off + len(k) + 1, off + len(e)})
		case key == "ETCDCTL_USER" || key == "CONCH_USER":
			if j := bytes.IndexByte(v, ':'); j >= 0 && j+1 < len(v) {
				out = append(out, [2]int{off + len(k) + 1 + j + 1, off + len(e)})
			}
		}
		off += len(e) + 1
	}
	return out
}

// secretsInArgs is secretsInEnv for argv: the PASSWORD of --user NAME:PASSWORD or
// --user=NAME:PASSWORD, up to a "--" (the child's argv is its own).
func secretsInArgs(args [][]byte) [][2]int {
	var out [][2]int
	off := 0
	for i, a := range args {
		if string(a) == "--" {
			break
		}
		v, vOff := []byte(nil), 0
		switch {
		case bytes.HasPrefix(a, []byte("--user=")):
			v, vOff = a[len("--user="):], off+len("--user=")
		case i > 0 && string(args[i-1]) == "--user":
			v, vOff = a, off
		}
		if j := bytes.IndexByte(v, ':'); j >= 0 && j+1 < len(v) {
			out = append(out, [2]int{vOff + j + 1, vOff + len(v)})
		}
		off += len(a) + 1
	}
	return out
}

// cloneArgs copies args' bytes: os.Args' strings share argv's memory, which scrubSecrets
// overwrites.
func cloneArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.Clone(a)
	}
	return out
}
