package systemd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/syncbuf"
)

// The header is the seven lines journald reads (systemd-journald.service(8)); values it
// would refuse never end the stream.
func TestStreamHeaderEncode(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		h    StreamHeader
		want string
	}{
		{"defaults", StreamHeader{Identifier: "batch-worker", Unit: "conch-worker.service", Priority: DefaultStreamPriority, LevelPrefix: true},
			"batch-worker\nconch-worker.service\n30\n1\n0\n0\n0\n"},
		{"console and kmsg, no prefix", StreamHeader{Identifier: "j", Priority: 3, ToKmsg: true, ToConsole: true},
			"j\n\n3\n0\n0\n1\n1\n"},
		{"control characters", StreamHeader{Identifier: "a\nb\tc", Unit: "x\n.service", Priority: 6},
			"a_b_c\n\n6\n0\n0\n0\n0\n"},
		{"too long", StreamHeader{Identifier: long, Unit: long + ".service", Priority: 6},
			long[:streamSetupLineMax] + "\n\n6\n0\n0\n0\n0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.h.encode()); got != tc.want {
				t.Errorf("encode() = %q, want %q", got, tc.want)
			}
		})
	}
}

// A service's logging settings, as systemd reports them over D-Bus, give the header systemd
// gives the service's own stream.
func TestServiceHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		props  map[string]any
		stderr bool
		want   StreamHeader
	}{
		{"nothing set", map[string]any{"SyslogIdentifier": "", "SyslogPriority": int32(30), "SyslogLevelPrefix": true, "StandardOutput": "journal", "StandardError": "inherit"}, false,
			StreamHeader{Identifier: "cmd", Unit: "s.service", Priority: 30, LevelPrefix: true}},
		{"identifier and level", map[string]any{"SyslogIdentifier": "worker", "SyslogPriority": int32(4<<3 | 5), "SyslogLevelPrefix": false}, false,
			StreamHeader{Identifier: "worker", Unit: "s.service", Priority: 4<<3 | 5}},
		{"journal+console on stdout", map[string]any{"StandardOutput": "journal+console", "StandardError": "inherit"}, true,
			StreamHeader{Identifier: "cmd", Unit: "s.service", Priority: DefaultStreamPriority, LevelPrefix: true, ToConsole: true}},
		{"stderr of its own", map[string]any{"StandardOutput": "journal+console", "StandardError": "kmsg"}, true,
			StreamHeader{Identifier: "cmd", Unit: "s.service", Priority: DefaultStreamPriority, LevelPrefix: true, ToKmsg: true}},
		{"mistyped", map[string]any{"SyslogIdentifier": 7, "SyslogPriority": "x"}, false,
			StreamHeader{Identifier: "cmd", Unit: "s.service", Priority: DefaultStreamPriority, LevelPrefix: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := serviceHeader(tc.props, "s.service", tc.stderr, "cmd"); got != tc.want {
				t.Errorf("serviceHeader = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := CommandIdentifier("/usr/local/bin/batch-worker"); got != "batch-worker" {
		t.Errorf("CommandIdentifier = %q", got)
	}
}

// streamSink is a Unix stream listener that keeps what one client sends (the relay's side of
// journald's socket is the code under test; journald itself is in tests/vm).
type streamSink struct {
	path string
	ln   net.Listener
	mu   sync.Mutex
	got  bytes.Buffer
	done chan struct{}
}

func newStreamSink(t *testing.T) *streamSink {
	t.Helper()
	s := &streamSink{path: filepath.Join(t.TempDir(), "stdout"), done: make(chan struct{})}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	go func() {
		defer close(s.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			s.mu.Lock()
			s.got.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-s.done
	})
	return s
}

// String returns what the client sent so far.
func (s *streamSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// wait returns what the client sent once it closed the stream.
func (s *streamSink) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(generousTimeout):
		t.Fatal("the relay never closed its stream")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// The relay sends the header, then every byte the pipe's writers wrote, in order, and ends
// once the last writer has closed the pipe.
func TestJournalRelayCopies(t *testing.T) {
	sink := newStreamSink(t)
	var calls int
	j, err := StartJournalRelay(sink.path, func(ctx context.Context) StreamHeader {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the header function's context has no deadline")
		}
		return StreamHeader{Identifier: "child", Priority: 6, LevelPrefix: true}
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// A writer of its own, as the child holds its copy of the pipe.
	child, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(j.File().Fd())), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := child.WriteString("one\npart"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.File().WriteString("ial\n<3>two\n"); err != nil {
		t.Fatal(err)
	}
	child.Close()
	if err := j.Close(generousTimeout); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got, want := sink.wait(t), "child\n\n6\n1\n0\n0\n0\none\npartial\n<3>two\n"; got != want {
		t.Errorf("journald got %q, want %q", got, want)
	}
	if calls != 1 {
		t.Errorf("header called %d times, want once", calls)
	}
}

// No output: no stream and no header call at all.
func TestJournalRelayIdle(t *testing.T) {
	j, err := StartJournalRelay(filepath.Join(t.TempDir(), "none"), func(context.Context) StreamHeader {
		t.Error("header called for a command that printed nothing")
		return StreamHeader{}
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(generousTimeout); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Without journald the output goes to the fallback, whole, and Close says why.
func TestJournalRelayFallback(t *testing.T) {
	var out syncbuf.Buffer
	j, err := StartJournalRelay(filepath.Join(t.TempDir(), "none"), func(context.Context) StreamHeader { return StreamHeader{} }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.File().WriteString("kept\n"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(generousTimeout); err == nil || !strings.Contains(err.Error(), "cannot connect to journald") {
		t.Errorf("Close = %v, want the failed connect", err)
	}
	if got := out.String(); got != "kept\n" {
		t.Errorf("fallback got %q, want the output", got)
	}
}

// A writer that outlives the command does not hold Close past its drain time.
func TestJournalRelayDrainBound(t *testing.T) {
	sink := newStreamSink(t)
	j, err := StartJournalRelay(sink.path, func(context.Context) StreamHeader { return StreamHeader{Identifier: "c"} }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stray, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(j.File().Fd())), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	if _, err := stray.WriteString("early\n"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(generousTimeout); !strings.HasSuffix(sink.String(), "early\n"); time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("journald got %q, want the line written", sink.String())
		}
	}
	began := time.Now()
	err = j.Close(200 * time.Millisecond)
	if took := time.Since(began); took > generousTimeout/2 {
		t.Errorf("Close took %v with a 200ms drain", took)
	}
	if err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Errorf("Close = %v, want output dropped", err)
	}
	sink.wait(t)
}
