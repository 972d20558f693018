package sema

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// freezer is a loopback TCP proxy to an etcd that can be frozen: it then
// forwards nothing more, in either direction, while keeping every connection
// open, which is how a stopped (SIGSTOP) or hung etcd looks to its clients.
type freezer struct {
	l      net.Listener
	target string
	thaw   chan struct{} // closed at cleanup
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezer(t *testing.T, endpoint string) *freezer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l, target: strings.TrimPrefix(endpoint, "http://"), thaw: make(chan struct{})}
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

func (f *freezer) accept() {
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
func (f *freezer) pipe(src, dst net.Conn) {
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

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// A waiter whose --wait runs out while etcd hangs returns
// within the wait plus giveUpTimeout (the give-up work shares one budget:
// giveUpWithin), with ErrUnavailable (69): its revoke could not be confirmed.
// Before, three bounded steps in a row made a 3 s wait last 6 s.
func TestWaitBoundWhileEtcdHangs(t *testing.T) {
	srv, c := startEtcd(t)
	f := newFreezer(t, srv.Endpoint)
	pc, err := clientv3.New(clientv3.Config{Endpoints: []string{f.l.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	holder := newSem(t, c, "hang", 1, Options{})
	h := mustAcquire(t, holder)
	defer release(t, h)
	w := newSem(t, pc, "hang", 1, Options{ConnectTimeout: 5 * time.Second})
	const wait = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	start := time.Now()
	ch := acquireAsync(ctx, w)
	waitQueued(t, c, holder, 2)
	f.freeze()
	var r acquired
	select {
	case r = <-ch:
	case <-time.After(testTimeout):
		t.Fatal("Acquire did not return")
	}
	took := time.Since(start)
	if !errors.Is(r.err, ErrUnavailable) {
		t.Fatalf("Acquire = %v, %v; want ErrUnavailable", r.h, r.err)
	}
	// 0.7 s of slack for a loaded machine; the overrun this catches was 3 s
	if limit := wait + giveUpTimeout + 700*time.Millisecond; took > limit {
		t.Fatalf("--wait %v returned after %v, more than %v", wait, took, limit)
	}
}
