package etcdtest

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Freezer is a loopback TCP proxy to an etcd that can be frozen: it then
// forwards nothing more, in either direction, while keeping every connection
// open, which is how a stopped (SIGSTOP) or hung etcd looks to its clients.
type Freezer struct {
	l      net.Listener
	target string
	thaw   chan struct{} // closed at cleanup
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// NewFreezer starts a Freezer in front of endpoint (an etcd client URL) on a random
// loopback port; t.Cleanup thaws it, closes every connection and joins its goroutines.
func NewFreezer(t testing.TB, endpoint string) *Freezer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Freezer{l: l, target: strings.TrimPrefix(endpoint, "http://"), thaw: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		close(f.thaw)
		l.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *Freezer) accept() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		f.wg.Add(2)
		go f.pipe(in, out)
		go f.pipe(out, in)
	}
}

// pipe copies from src to dst until either closes; frozen, it holds what it read.
func (f *Freezer) pipe(src, dst net.Conn) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		if frozen {
			<-f.thaw
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// Freeze stops the forwarding, in both directions, for good; connections stay open.
func (f *Freezer) Freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// Addr is the Freezer's host:port, for a client's endpoints.
func (f *Freezer) Addr() string { return f.l.Addr().String() }
