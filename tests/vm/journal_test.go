package vm

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// The child's own output in the journal: when conch's stdout and stderr are
// journald's stream, what the child prints is logged under conch's service, as the service's
// SyslogIdentifier= or the command's base name, never under the child's scope; elsewhere the
// child's stdio is conch's own, untouched (D5).

//go:embed testdata/journal-child.sh
var journalChildScript string

// lateLines is how long the child and its grandchild wait before their last lines: longer than
// journald keeps what it read about a writer's cgroup before reading it again.
const lateLines = "11"

// journalWait bounds the wait for journald to have stored lines that were written already.
const journalWait = 30 * time.Second

func TestChildOutputInJournal(t *testing.T) {
	e := newEnv(t)
	n := e.boot(t)
	n.write(n.dir+"/journal-child.sh", journalChildScript)
	type run struct {
		name, unit, ident string
		props, flags      []string
		done              <-chan int
	}
	// All at once on one node: each waits lateLines seconds.
	runs := []*run{
		{name: "jscope", unit: "jscope.service", ident: "jworker", props: []string{"Type=notify", "NotifyAccess=main", "SyslogIdentifier=jworker"}},
		{name: "jdirect", unit: "jdirect.service", ident: "journal-child.sh", flags: []string{"--scope=never"}},
		{name: "jstderr", unit: "jstderr.service", ident: "journal-child.sh", props: []string{"StandardOutput=file:" + n.dir + "/jstderr.out", "StandardError=journal"}},
	}
	for _, r := range runs {
		n.sh("mkdir -p " + n.dir + "/" + r.name)
		argv := append(append([]string{"sema", r.name, "--max", "1"}, r.flags...), "--", n.dir+"/journal-child.sh", n.dir+"/"+r.name, r.name, lateLines)
		r.done = n.journalService(r.unit, r.props, argv...)
	}
	pipeRun := n.service("jpipe.service", nil, "sema", "jpipe", "--max", "1", "--", n.dir+"/journal-child.sh", n.dir, "jpipe", "0")

	// STATUS= names the scope while the child runs (D10).
	n.await(n.dir + "/jscope/running")
	status := n.show("jscope.service", "StatusText")["StatusText"]
	if !regexp.MustCompile(`command running \(PID [0-9]+ in conch-sema-jscope-[0-9]+\.scope\)`).MatchString(status) {
		t.Errorf("jscope.service: StatusText=%q, want the child's PID and its scope conch-sema-jscope-REV.scope", status)
	}

	for _, r := range runs {
		if code := <-r.done; code != 0 {
			t.Errorf("%s: conch exited %d, want the child's 0", r.unit, code)
		}
	}
	n.checkJournal("jscope.service", "jscope", "jworker", []string{"out-first", "err-first", "err-level3", "grandchild-late", "child-late"})
	n.checkJournal("jdirect.service", "jdirect", "journal-child.sh", []string{"out-first", "err-first", "err-level3", "grandchild-late", "child-late"})
	// stdout is a file there: only stderr is the journal, and only it is relayed.
	n.checkJournal("jstderr.service", "jstderr", "journal-child.sh", []string{"err-first", "err-level3"})
	if got, want := sortedLines(n.read(n.dir+"/jstderr.out")), "jstderr child-late\njstderr grandchild-late\njstderr out-first"; got != want {
		t.Errorf("StandardOutput=file: the file holds %q (sorted), want the child's stdout %q", got, want)
	}
	for _, r := range runs[:2] {
		child, own := n.read(n.dir+"/"+r.name+"/child-fd1"), n.read(n.dir+"/"+r.name+"/conch-fd1")
		if !strings.HasPrefix(child, "pipe:") || !strings.HasPrefix(own, "socket:") {
			t.Errorf("%s: the child's stdout is %q and conch's %q, want the relay's pipe and journald's socket", r.unit, child, own)
		}
	}

	// A pipe (systemd-run --pipe, no JOURNAL_STREAM): the child's stdout and stderr are
	// conch's own, and nothing of it reaches the journal.
	res, err := pipeRun.Wait(n.ctx)
	if err != nil {
		t.Fatalf("jpipe.service: %v", err)
	}
	if got, want := sortedLines(string(res.Stdout)), "jpipe child-late\njpipe grandchild-late\njpipe out-first"; got != want {
		t.Errorf("on a pipe the child's stdout reached conch's caller as %q (sorted), want %q", got, want)
	}
	if got := string(res.Stderr); !strings.Contains(got, "jpipe err-first\n<3>jpipe err-level3\n") {
		t.Errorf("on a pipe the child's stderr reached conch's caller as %q, want its two lines as written", got)
	}
	if child, own := n.read(n.dir+"/child-fd1"), n.read(n.dir+"/conch-fd1"); child != own || !strings.HasPrefix(child, "pipe:") {
		t.Errorf("on a pipe the child's stdout is %q and conch's %q, want the same pipe", child, own)
	}
	if got := n.journal("jpipe"); len(got) != 0 {
		t.Errorf("on a pipe the child's lines are in the journal: %v", got)
	}
}

// journalService starts conch with args as the transient service unit whose stdout and
// stderr are the journal (systemd-run without --pipe: StandardOutput=journal, systemd's
// default), with props, and returns a channel that gets conch's exit status (-1 when it
// cannot be had). The service is killed when the test ends.
func (n *node) journalService(unit string, props []string, args ...string) <-chan int {
	n.t.Helper()
	argv := []string{"systemd-run", "--wait", "--collect", "--quiet", "--unit=" + unit}
	for _, p := range props {
		argv = append(argv, "--property="+p)
	}
	for _, env := range n.env() {
		argv = append(argv, "--setenv="+env)
	}
	argv = append(append(argv, "--", conch), args...)
	cmd := n.NsenterCmd(n.ctx, argv...)
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			done <- 0
		case errors.As(err, &exit) && exit.Exited():
			done <- exit.ExitCode()
		default:
			done <- -1
		}
	}()
	n.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return done
}

// journalEntry is one entry of `journalctl -o json`, with the fields the tests read.
type journalEntry map[string]any

func (e journalEntry) get(field string) string {
	s, _ := e[field].(string)
	return s
}

// journal returns the node's journal entries that match (journalAll) and whose MESSAGE
// starts with tag, oldest first.
func (n *node) journal(tag string, match ...string) []journalEntry {
	n.t.Helper()
	var entries []journalEntry
	for _, e := range n.journalAll(match...) {
		if strings.HasPrefix(e.get("MESSAGE"), tag+" ") {
			entries = append(entries, e)
		}
	}
	return entries
}

// checkJournal asserts that `journalctl -u unit` shows each of the child's lines (TAG LINE,
// level prefix removed) once, written by conch (its _PID, in unit: _SYSTEMD_UNIT) with
// SYSLOG_IDENTIFIER ident, at PRIORITY 3 for "err-level3" and 6 for the rest; and that no
// entry of the whole journal with those lines names another unit (the child's scope). It
// polls until journald has them all, for up to journalWait.
func (n *node) checkJournal(unit, tag, ident string, lines []string) {
	n.t.Helper()
	var got []journalEntry
	ctx, cancel := context.WithTimeout(n.ctx, journalWait)
	defer cancel()
	_ = systemdtest.WaitFor(ctx, "the child's lines", func() (bool, error) { // missing ones are reported below
		got = n.journal(tag, "-u", unit)
		return len(got) >= len(lines), nil
	})
	conchPID := ""
	for _, e := range n.journal(tag+"[max=1]:", "-u", unit) { // conch's own entries: the semaphore is named tag
		if e.get("SYSLOG_IDENTIFIER") == "conch" {
			conchPID = e.get("_PID")
		}
	}
	if conchPID == "" {
		n.t.Errorf("journalctl -u %s: no entry of conch itself to take its PID from", unit)
	}
	want := map[string]bool{}
	for _, l := range lines {
		want[tag+" "+l] = true
	}
	for _, e := range got {
		msg := e.get("MESSAGE")
		if !want[msg] {
			n.t.Errorf("journalctl -u %s: unexpected or repeated line %q", unit, msg)
			continue
		}
		delete(want, msg)
		prio := "6"
		if strings.HasSuffix(msg, "err-level3") {
			prio = "3"
		}
		for field, v := range map[string]string{"_SYSTEMD_UNIT": unit, "SYSLOG_IDENTIFIER": ident, "_PID": conchPID, "PRIORITY": prio} {
			if e.get(field) != v {
				n.t.Errorf("journalctl -u %s: %q has %s=%q, want %q", unit, msg, field, e.get(field), v)
			}
		}
	}
	for msg := range want {
		n.t.Errorf("journalctl -u %s: line %q missing", unit, msg)
	}
	for _, e := range n.journal(tag) {
		if u := e.get("_SYSTEMD_UNIT"); u != unit {
			n.t.Errorf("%q is in the journal under _SYSTEMD_UNIT=%s, want only %s", e.get("MESSAGE"), u, unit)
		}
	}
}

// sortedLines returns the lines of s, trimmed, in sorted order, one per line: the child's
// late line and its grandchild's come in either order.
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// The child's last line is in the journal before conch's RELEASED entry: conch waits (bounded)
// for the relay of the child's output to reach the pipe's end before it says the slot is
// released, so `journalctl -u UNIT` reads in the order things happened. Before, the relay
// connected to journald at the child's first output, in parallel with conch's own entries,
// and a short command's lines landed after "released". Several runs at once on one node, so a
// race shows in at least one of them.
func TestChildOutputBeforeRelease(t *testing.T) {
	e := newEnv(t)
	n := e.boot(t)
	const runs = 6
	done := make([]<-chan int, runs)
	for i := range runs {
		tag := "jorder" + strconv.Itoa(i)
		done[i] = n.journalService(tag+".service", nil, "sema", tag, "--max", "1", "--",
			"/bin/sh", "-c", "echo "+tag+" first; echo "+tag+" last")
	}
	for i := range runs {
		if code := <-done[i]; code != 0 {
			t.Errorf("jorder%d.service: conch exited %d, want the child's 0", i, code)
		}
	}
	for i := range runs {
		tag := "jorder" + strconv.Itoa(i)
		var got []journalEntry
		ctx, cancel := context.WithTimeout(n.ctx, journalWait)
		_ = systemdtest.WaitFor(ctx, "the child's last line", func() (bool, error) {
			got = n.journal(tag, "-u", tag+".service")
			return len(got) >= 2, nil
		})
		cancel()
		var order, dump []string
		for _, e := range n.journalAll("-u", tag+".service") {
			dump = append(dump, e.get("__SEQNUM")+" "+e.get("__REALTIME_TIMESTAMP")+" "+e.get("_PID")+" "+e.get("MESSAGE"))
			switch {
			case e.get("MESSAGE") == tag+" last":
				order = append(order, "last")
			case e.get("CONCH_STATE") == "RELEASED":
				order = append(order, "RELEASED")
			}
		}
		if !slices.Equal(order, []string{"last", "RELEASED"}) {
			t.Errorf("journalctl -u %s.service: the child's last line and conch's RELEASED entry come as %v, want [last RELEASED]\n%s", tag, order, strings.Join(dump, "\n"))
		}
	}
}

// journalAll returns the node's journal entries that match (journalctl's own matches and
// options), oldest first.
func (n *node) journalAll(match ...string) []journalEntry {
	n.t.Helper()
	out := n.sh("journalctl --no-pager -q -b -o json " + strings.Join(match, " "))
	var entries []journalEntry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e journalEntry
		if line != "" && json.Unmarshal([]byte(line), &e) == nil {
			entries = append(entries, e)
		}
	}
	return entries
}
