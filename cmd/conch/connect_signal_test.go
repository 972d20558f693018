package main

import (
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSignalWhileConnecting: a signal that comes while conch connects to an etcd that accepts
// connections and never answers ends conch at once, dying of the signal (D3), with or without
// a login to make: it does not wait out --dial-timeout (30 s here) and then exit 69.
func TestSignalWhileConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		var held []net.Conn // accepted and never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			accepted.Add(1)
		}
	}()
	e := newEnv(t)
	pw := e.path("pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, login := range [][]string{nil, {"--user", "root", "--password-file", pw}} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			before := accepted.Load()
			args := append([]string{"sema", "sc", "--max", "1", "--endpoints", "http://" + ln.Addr().String(), "--dial-timeout", "30s"}, login...)
			p := e.start(append(args, "--", "true")...)
			waitFor(t, "conch connecting", func() bool { return accepted.Load() > before })
			sent := time.Now()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			if took := time.Since(sent); r.signal != sig || took > 15*time.Second {
				t.Errorf("login %v, %v while connecting: after %v, %v; want death by the signal, well within the 30 s dial timeout", login, sig, took, r)
			}
			if !strings.Contains(r.stderr, "while connecting to etcd") {
				t.Errorf("login %v, %v while connecting: stderr %q, want the line saying so", login, sig, r.stderr)
			}
		}
	}
}
