// Command bench-stamp is the child process of the benchmarks: it
// appends "S <tag> <pid> <ns>" to a file as the first thing its main does,
// optionally holds, then appends "E <tag> <pid> <ns>" as the last thing
// before it exits. Times are CLOCK_MONOTONIC nanoseconds, comparable across
// processes on one machine. It imports only os, strconv, syscall and unsafe
// (no package with heavy init: no fmt, time or net), so the Go
// runtime's start is all that precedes the first stamp (the harness measures
// that cost and reports it as part of the floor).
//
// Usage: bench-stamp FILE TAG [HOLD]
//
// HOLD is either a duration in milliseconds ("20") to sleep, or the path of
// a FIFO to open and read until EOF (the harness opens it for writing and
// closes it to end the hold).
package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

const clockMonotonic = 1

func mono() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func stamp(file, kind, tag string, t int64) {
	fd, err := syscall.Open(file, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		os.Exit(3)
	}
	line := kind + " " + tag + " " + strconv.Itoa(os.Getpid()) + " " + strconv.FormatInt(t, 10) + "\n"
	syscall.Write(fd, []byte(line))
	syscall.Close(fd)
}

func main() {
	t := mono()
	if len(os.Args) < 3 {
		os.Exit(2)
	}
	file, tag := os.Args[1], os.Args[2]
	stamp(file, "S", tag, t)
	if len(os.Args) > 3 {
		hold(os.Args[3])
	}
	stamp(file, "E", tag, mono())
}

func hold(arg string) {
	if ms, err := strconv.Atoi(arg); err == nil {
		ts := syscall.NsecToTimespec(int64(ms) * 1e6)
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		}
		return
	}
	fd, err := syscall.Open(arg, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Exit(4)
	}
	buf := make([]byte, 64)
	for {
		n, err := syscall.Read(fd, buf)
		if n <= 0 && err != syscall.EINTR {
			break
		}
	}
	syscall.Close(fd)
}
