package systemd

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CloseJournalStream returns only once the reader (journald) has read all that was written:
// an entry logged after it comes after the stream's last line (the order a node test checks
// in a real journal, tests/vm TestChildOutputBeforeRelease). Here the reader starts reading
// only when told, after CloseJournalStream has been called.
func TestCloseJournalStreamWaitsForTheReader(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "stdout")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const payload = 200 << 10 // more than one read's worth
	start := make(chan struct{})
	var read atomic.Int64
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		<-start
		buf := make([]byte, 4096) // small reads: the reader takes a while
		for {
			n, err := c.Read(buf)
			read.Add(int64(n))
			if err == io.EOF {
				err = nil
			}
			if err != nil || n == 0 {
				served <- err
				return
			}
		}
	}()
	conn, err := DialJournalStream(context.Background(), sock, StreamHeader{Identifier: "t", Priority: DefaultStreamPriority})
	if err != nil {
		t.Fatal(err)
	}
	header := int64(len(StreamHeader{Identifier: "t", Priority: DefaultStreamPriority}.encode()))
	data := make([]byte, payload)
	for i := range data {
		data[i] = 'x'
		if i%80 == 79 {
			data[i] = '\n'
		}
	}
	wrote := make(chan error, 1)
	go func() { _, err := conn.Write(data); wrote <- err }() // may block until the reader reads
	atReturn := make(chan int64, 1)
	go func() {
		if err := <-wrote; err != nil {
			t.Error(err)
		}
		CloseJournalStream(conn, time.Minute)
		atReturn <- read.Load() // what the reader had read when it returned
	}()
	close(start)
	got := <-atReturn
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if got != header+payload {
		t.Fatalf("CloseJournalStream returned when the reader had read %d bytes of %d", got, header+payload)
	}
}
