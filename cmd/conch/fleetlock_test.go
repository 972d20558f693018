package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/sema/schema"
)

// fleetServer is `conch fleetlock` started by a test on a random loopback port.
type fleetServer struct {
	p    *proc
	base string
}

var servingLine = regexp.MustCompile(`serving FleetLock on (http://127\.0\.0\.1:[0-9]+)`)

// startFleetlock starts conch fleetlock with args on 127.0.0.1:0 and waits for its
// "serving" line.
func (e *env) startFleetlock(args ...string) *fleetServer {
	e.t.Helper()
	p := e.start(append([]string{"fleetlock", "--listen", "127.0.0.1:0"}, args...)...)
	var base string
	waitFor(e.t, "conch fleetlock serving", func() bool {
		if m := servingLine.FindStringSubmatch(p.stderr.String()); m != nil {
			base = m[1]
			return true
		}
		if p.exited() {
			e.t.Fatalf("conch fleetlock exited: %s", p.res)
		}
		return false
	})
	return &fleetServer{p: p, base: base}
}

// post sends a protocol request as a client does (no Content-Type) and returns the
// status and the error body's kind and value.
func (f *fleetServer) post(t *testing.T, api, id, group string) (int, string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"client_params":{"id":%q,"group":%q}}`, id, group)
	req, _ := http.NewRequest(http.MethodPost, f.base+"/v1/"+api, bytes.NewReader([]byte(body)))
	req.Header.Set("fleet-lock-protocol", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", api, id, err)
	}
	defer resp.Body.Close()
	var ref struct{ Kind, Value string }
	_ = json.NewDecoder(resp.Body).Decode(&ref)
	return resp.StatusCode, ref.Kind, ref.Value
}

const rebootID = "0b6e4cfc2a7d4e0f9a1f3b5c7d9e1f20"

// The server SIGKILLed and started again: the holder is still the holder (state only in
// etcd), others still refused; SIGTERM stops it cleanly (killed by SIGTERM, D3).
func TestFleetlockRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.startFleetlock("--group", "default=1")
	if st, k, v := s.post(t, "pre-reboot", rebootID, "default"); st != 200 {
		t.Fatalf("pre-reboot: %d %s %s", st, k, v)
	}
	if err := s.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.p.wait(t)
	start := time.Now()
	s2 := e.startFleetlock("--group", "default=1")
	t.Logf("serving again %v after the SIGKILL", time.Since(start).Round(time.Millisecond))
	if st, k, v := s2.post(t, "pre-reboot", rebootID, "default"); st != 200 {
		t.Fatalf("the holder after the restart: %d %s %s", st, k, v)
	}
	if st, k, v := s2.post(t, "pre-reboot", "other-node", "default"); st != 423 || k != "failed_lock_semaphore_full" || !strings.Contains(v, rebootID) {
		t.Fatalf("another id after the restart: %d %s %s", st, k, v)
	}
	if n := e.keys(schema.Prefix("default", 1)); n != 1 {
		t.Fatalf("%d keys after the restart, want the one slot", n)
	}
	if err := s2.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := s2.p.wait(t); r.signal != syscall.SIGTERM {
		t.Fatalf("after SIGTERM: %s", r)
	}
}

// Exit statuses: 64 for bad flags before anything is done; 69 when the address is in use
// (said so) or etcd does not answer at start.
func TestFleetlockExits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleetlock"}, "missing --listen"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--group", "default"}, "expected NAME=N"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--group", "a=1", "--group", "a=2"}, "given twice"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--group", "a_b=1"}, "^[a-zA-Z0-9.-]+$"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--group", "a=0"}, "1..10000"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--hold", "0"}, "at least 1s"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent"}, "go together"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"}, "cannot read TLS certificate"},
		{[]string{"fleetlock", "--listen", "nowhere"}, "--listen"},
		{[]string{"fleetlock", "--listen", "127.0.0.1:0", "extra"}, "no arguments"},
	} {
		if r := e.run(tc.args...); r.status != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: %s; want 64 saying %q", tc.args, r, tc.want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if r := e.run("fleetlock", "--listen", ln.Addr().String()); r.status != exitUnavailable || !strings.Contains(r.stderr, "address in use") {
		t.Errorf("address in use: %s; want 69 saying so", r)
	}
	if r := e.run("fleetlock", "--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--dial-timeout", "1s"); r.status != exitUnavailable {
		t.Errorf("no etcd: %s; want 69", r)
	}
}

// Under systemd: READY=1 once listening and etcd answered, with a STATUS= naming the groups
// and the slots held, refreshed at a grant; the journal-less line per grant names the id.
func TestFleetlockNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := filepath.Join(e.dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e.vars = append(e.vars, "NOTIFY_SOCKET="+path)
	s := e.startFleetlock("--group", "default=2", "--group", "db=1")
	read := func() string {
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(testTimeout))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	if got := read(); !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, "STATUS=serving FleetLock on "+s.base+": db 0/1 held, default 0/2 held") {
		t.Fatalf("first notification %q", got)
	}
	if st, _, _ := s.post(t, "pre-reboot", rebootID, "default"); st != 200 {
		t.Fatal(st)
	}
	if got := read(); !strings.Contains(got, "default 1/2 held") {
		t.Errorf("after a grant: %q", got)
	}
	waitFor(t, "the grant's line", func() bool {
		return strings.Contains(s.p.stderr.String(), "default[max=2]: reboot slot granted to "+rebootID+" until ")
	})
	if st, _, _ := s.post(t, "steady-state", rebootID, "default"); st != 200 {
		t.Fatal(st)
	}
	waitFor(t, "the release's line", func() bool {
		return strings.Contains(s.p.stderr.String(), "default[max=2]: reboot slot of "+rebootID+" released")
	})
}

// One queue (D19): a conch sema job of the group holds, pre-reboot is refused naming its
// node; once it ends, granted; while the reboot holds, the job exits 75 with --nonblock,
// naming the rebooting id, and --release --node ID frees the slot at once.
func TestFleetlockSharedQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.startFleetlock("--group", "maint=1")
	job := e.start("sema", "maint", "--max", "1", "--node", "vacuum-node", "--", "sleep", "60")
	waitFor(t, "the job holds", func() bool { return e.keys(schema.Prefix("maint", 1)) == 1 })
	if st, k, v := s.post(t, "pre-reboot", rebootID, "maint"); st != 423 || !strings.Contains(v, "vacuum-node") {
		t.Fatalf("pre-reboot beside a job: %d %s %s", st, k, v)
	}
	_ = job.cmd.Process.Signal(syscall.SIGTERM)
	job.wait(t)
	if st, k, v := s.post(t, "pre-reboot", rebootID, "maint"); st != 200 {
		t.Fatalf("pre-reboot after the job: %d %s %s", st, k, v)
	}
	if r := e.run("sema", "maint", "--max", "1", "--nonblock", "--", "true"); r.status != exitConflict || !strings.Contains(r.stderr, rebootID) {
		t.Fatalf("a job beside the reboot: %s; want 75 naming the id", r)
	}
	if r := e.run("sema", "maint", "--max", "1", "--release", "--node", rebootID); r.status != 0 {
		t.Fatalf("--release --node: %s", r)
	}
	if r := e.run("sema", "maint", "--max", "1", "--nonblock", "--", "true"); r.status != 0 {
		t.Fatalf("a job after the release: %s", r)
	}
	if n := e.keys(schema.Prefix("maint", 1)); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}
