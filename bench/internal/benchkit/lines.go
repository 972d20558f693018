package benchkit

import (
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Mono is CLOCK_MONOTONIC in nanoseconds: the clock of every stamp the harness and the
// children it times write.
func Mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Line is one line of a process's stderr with the time (Mono) the harness read it.
type Line struct {
	T    int64
	Text string
}

// Lines are a process's stderr lines as the harness reads them; safe for one writer (Add)
// and concurrent readers.
type Lines struct {
	mu sync.Mutex
	ls []Line
}

// Add records text, read at t.
func (l *Lines) Add(t int64, text string) {
	l.mu.Lock()
	l.ls = append(l.ls, Line{t, text})
	l.mu.Unlock()
}

// Text returns the lines read so far, each ended by a newline.
func (l *Lines) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, x := range l.ls {
		b.WriteString(x.Text + "\n")
	}
	return b.String()
}

// First returns the read time of the first line containing s, and whether there is one.
func (l *Lines) First(s string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.ls {
		if strings.Contains(x.Text, s) {
			return x.T, true
		}
	}
	return 0, false
}

// All returns a copy of the lines read so far.
func (l *Lines) All() []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Line(nil), l.ls...)
}
