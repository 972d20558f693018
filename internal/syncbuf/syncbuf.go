// Package syncbuf is a bytes.Buffer that tests can read while a process or
// goroutine writes to it (the output of conch, a node, a pty).
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is safe for concurrent Write and reads. The zero value is empty and
// ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether s was written so far.
func (b *Buffer) Contains(s string) bool { return strings.Contains(b.String(), s) }
