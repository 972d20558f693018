package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemd"

	"github.com/conch-project/conch/sema"
	"github.com/coreos/go-systemd/v22/journal"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// entry is one captured journal entry or notify message.
type entry struct {
	msg    string
	prio   journal.Priority
	fields map[string]string
}

// fakeSinks captures what a reporter sends to journald and sd_notify.
type fakeSinks struct {
	entries []entry
	notes   []string
	fail    bool
}

func (f *fakeSinks) reporter(verbose, journaled bool) (*reporter, *bytes.Buffer) {
	var buf bytes.Buffer
	r := &reporter{w: &buf, verbose: verbose, name: "heavy-jobs", max: 2, notify: func(s string) { f.notes = append(f.notes, s) }}
	if journaled {
		r.journal = func(m string, p journal.Priority, fl map[string]string) error {
			if f.fail {
				return fmt.Errorf("no journald")
			}
			f.entries = append(f.entries, entry{m, p, fl})
			return nil
		}
	}
	return r, &buf
}

// drive replays a typical run through the reporter: enqueued, waiting with
// 3 then 1 ahead, held, started, released.
func drive(r *reporter) {
	r.onEvent(sema.Event{Kind: sema.Enqueued, Rev: 41, Lease: clientv3.LeaseID(0xabc), TTL: 10 * time.Second})
	r.onEvent(sema.Event{Kind: sema.Waiting, Rev: 41, Ahead: 3})
	r.onEvent(sema.Event{Kind: sema.Waiting, Rev: 41, Ahead: 1})
	r.onEvent(sema.Event{Kind: sema.Held, Rev: 41, Lease: clientv3.LeaseID(0xabc)})
	r.started(4242)
	r.released(0, 1500*time.Millisecond)
}

// D10: every transition is a journal entry with the CONCH_* fields and a
// readable MESSAGE; debug detail needs -v; nothing goes to stderr.
func TestReporterJournal(t *testing.T) {
	var f fakeSinks
	r, buf := f.reporter(false, true)
	drive(r)
	if buf.Len() != 0 {
		t.Errorf("stderr got %q; want nothing when logging to the journal", buf)
	}
	var states []string
	for _, e := range f.entries {
		states = append(states, e.fields["CONCH_STATE"])
		for k, want := range map[string]string{"CONCH_SEMA": "heavy-jobs", "CONCH_MAX": "2", "CONCH_REV": "41", "CONCH_LEASE": "0000000000000abc", "SYSLOG_IDENTIFIER": "conch"} {
			if e.fields[k] != want {
				t.Errorf("entry %q: %s=%q, want %q", e.msg, k, e.fields[k], want)
			}
		}
		if !strings.HasPrefix(e.msg, "heavy-jobs[max=2]: ") {
			t.Errorf("MESSAGE %q does not name the semaphore", e.msg)
		}
	}
	if got := strings.Join(states, ","); got != "WAIT,WAIT,HELD,RELEASED" {
		t.Fatalf("states %s, want WAIT,WAIT,HELD,RELEASED (the debug lines only with -v)", got)
	}
	if e := f.entries[0]; e.fields["CONCH_AHEAD"] != "3" || e.msg != "heavy-jobs[max=2]: waiting for heavy-jobs[max=2] (2/2 held), 3 ahead" {
		t.Errorf("first WAIT entry: %q %v", e.msg, e.fields)
	}
	if e := f.entries[3]; e.fields["CONCH_EXIT_STATUS"] != "0" || e.prio != journal.PriInfo {
		t.Errorf("RELEASED entry: prio %d fields %v", e.prio, e.fields)
	}

	var fv fakeSinks
	r, _ = fv.reporter(true, true)
	drive(r)
	if len(fv.entries) != 6 || fv.entries[0].prio != journal.PriDebug || fv.entries[0].fields["CONCH_STATE"] != "" {
		t.Errorf("with -v: %d entries (want 6, the first a debug entry without state): %+v", len(fv.entries), fv.entries)
	}
}

// D10 "elsewhere": plain lines, HELD and RELEASED only with -v; a journal
// that cannot be written falls back to the same lines.
func TestReporterPlainLines(t *testing.T) {
	for _, tc := range []struct {
		name      string
		verbose   bool
		journaled bool
		want      []string
	}{
		{"quiet", false, false, []string{"conch: heavy-jobs[max=2]: waiting for heavy-jobs[max=2] (2/2 held), 3 ahead"}},
		{"journald down", false, true, []string{"conch: heavy-jobs[max=2]: waiting for heavy-jobs[max=2] (2/2 held), 3 ahead"}},
		{"verbose", true, false, []string{
			"conch: heavy-jobs[max=2]: enqueued rev=41 lease=0000000000000abc ttl=10s",
			"conch: heavy-jobs[max=2]: waiting for heavy-jobs[max=2] (2/2 held), 3 ahead",
			"conch: heavy-jobs[max=2]: waiting for heavy-jobs[max=2] (2/2 held), 1 ahead",
			"conch: heavy-jobs[max=2]: slot held, rev=41 (fencing token)",
			"conch: heavy-jobs[max=2]: command started, PID 4242",
			"conch: heavy-jobs[max=2]: released after 1.5s, child status 0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeSinks{fail: true}
			r, buf := f.reporter(tc.verbose, tc.journaled)
			drive(r)
			if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("stderr:\n%s\nwant:\n%s", buf, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// D10: STATUS= on every transition with the queue position, READY=1 once the
// command runs, STOPPING=1 when conch winds down.
func TestReporterNotify(t *testing.T) {
	var f fakeSinks
	r, _ := f.reporter(false, false)
	drive(r)
	want := []string{
		"STATUS=waiting for heavy-jobs[max=2] (2/2 held), 3 ahead",
		"STATUS=waiting for heavy-jobs[max=2] (2/2 held), 1 ahead",
		"STATUS=holding heavy-jobs[max=2], rev 41: starting the command",
		"READY=1\nSTATUS=holding heavy-jobs[max=2], rev 41: command running (PID 4242)",
		"STOPPING=1\nSTATUS=released heavy-jobs[max=2] after 1.5s, command exited with status 0",
	}
	if strings.Join(f.notes, "|") != strings.Join(want, "|") {
		t.Fatalf("notify messages:\n%q\nwant:\n%q", f.notes, want)
	}

	f = fakeSinks{}
	r, _ = f.reporter(false, true)
	r.onEvent(sema.Event{Kind: sema.Enqueued, Rev: 7})
	r.errorf(stateTimeout, "no free slot: all 2 held")
	if len(f.notes) != 1 || f.notes[0] != "STOPPING=1\nSTATUS=heavy-jobs[max=2]: no free slot: all 2 held" {
		t.Errorf("notify on TIMEOUT: %q", f.notes)
	}
	if len(f.entries) != 1 || f.entries[0].fields["CONCH_STATE"] != "TIMEOUT" || f.entries[0].prio != journal.PriWarning {
		t.Errorf("journal on TIMEOUT: %+v", f.entries)
	}
	r.errorf(stateLost, "slot lost")
	if e := f.entries[1]; e.fields["CONCH_STATE"] != "LOST" || e.prio != journal.PriErr {
		t.Errorf("journal on LOST: %+v", e)
	}
}

// The watchdog pings at half of WATCHDOG_USEC when WATCHDOG_PID is ours (or
// unset), never for another PID, and stop joins its goroutine.
func TestWatchdog(t *testing.T) {
	pings := make(chan string, 100)
	notify := func(s string) { pings <- s }

	t.Setenv("WATCHDOG_USEC", "20000")
	t.Setenv("WATCHDOG_PID", fmt.Sprint(os.Getpid()))
	stop := systemd.StartWatchdog(notify)
	for i := range 3 {
		select {
		case p := <-pings:
			if p != "WATCHDOG=1" {
				t.Fatalf("ping %d = %q", i, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no watchdog ping %d within 5 s", i)
		}
	}
	stop() // joins the goroutine: no ping can come later
	for len(pings) > 0 {
		<-pings
	}

	t.Setenv("WATCHDOG_PID", "1")
	systemd.StartWatchdog(notify)()
	t.Setenv("WATCHDOG_USEC", "")
	systemd.StartWatchdog(notify)()
	systemd.StartWatchdog(nil)()
	if len(pings) != 0 {
		t.Fatal("pinged without a watchdog for this process")
	}
}

// notifierFor is nil without NOTIFY_SOCKET; with it, messages reach the
// socket as datagrams (sd_notify's protocol).
func TestNotifierFor(t *testing.T) {
	if systemd.NotifierFor(func(string) string { return "" }) != nil {
		t.Fatal("no NOTIFY_SOCKET: want nil")
	}
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	systemd.NotifierFor(os.Getenv)("READY=1\nSTATUS=x")
	buf := make([]byte, 256)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1\nSTATUS=x" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

// With -q (warnOnly) plain lines are only warnings and errors: no waiting or
// re-entering line; the journal and sd_notify get what they get without -q.
func TestReporterQuiet(t *testing.T) {
	var buf bytes.Buffer
	var notes []string
	r := newReporter(&buf, fixedEnv(nil), false, "heavy-jobs", 2)
	r.warnOnly = true
	r.notify = func(s string) { notes = append(notes, s) }
	drive(r)
	r.onEvent(sema.Event{Kind: sema.Reentering, Err: fmt.Errorf("session lost")})
	if buf.Len() != 0 {
		t.Fatalf("stderr with -q: %q, want nothing", buf.String())
	}
	if len(notes) == 0 || !strings.Contains(strings.Join(notes, "\n"), "STATUS=waiting for heavy-jobs[max=2] (2/2 held), 3 ahead") {
		t.Errorf("sd_notify with -q: %q, want the same STATUS= lines", notes)
	}
	r.warnf("WARNING: w")
	r.errorf(stateTimeout, "no slot within --wait 1s")
	r.errorf(stateLost, "lost")
	want := "conch: heavy-jobs[max=2]: WARNING: w\nconch: heavy-jobs[max=2]: no slot within --wait 1s\nconch: heavy-jobs[max=2]: lost\n"
	if buf.String() != want {
		t.Errorf("warnings and errors with -q: %q, want %q", buf.String(), want)
	}
	var f fakeSinks
	j, _ := f.reporter(false, true)
	j.warnOnly = true
	drive(j)
	if len(f.entries) != 4 {
		t.Errorf("journal with -q: %d entries, want the 4 transitions as without -q", len(f.entries))
	}
}
