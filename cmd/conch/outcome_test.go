package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
	"github.com/coreos/go-systemd/v22/journal"
)

// holding is a holding's Result, error, cause and terminal, and the limit lines name.
type holding struct {
	res      unitrun.Result
	runErr   error
	cause    error
	limit    string
	terminal bool
}

// outcome is conch's end of holding h: slotrun's decision, as conch words it.
func outcome(h holding) verdict {
	return endOf(slotrun.Decide(slotrun.Holding{Result: h.res, RunErr: h.runErr, Cause: h.cause, Terminal: h.terminal}), h.limit)
}

// outcome over every combination of how the child ended and why it was asked to stop (D3,
// D7): the one decision of a holding's end, table-tested without etcd or a child.
func TestOutcome(t *testing.T) {
	sigterm := errSignal{syscall.SIGTERM}
	lost := fmt.Errorf("%w: /conch/v1/sema/x/1/abc", sema.ErrLeaseLost)
	fenced := fmt.Errorf("%w: /conch/v1/sema/x/1/abc", sema.ErrFenced)
	deleted := fmt.Errorf("%w: /conch/v1/sema/x/1/abc", sema.ErrKeyDeleted)
	const guardianFenced = "slot lost while the child ran: conch was stopped or stalled until its lease's deadline, so the child's guardian stopped the child on its own before the lease could expire"
	late := fmt.Errorf("%w; %w, 4s late: /conch/v1/sema/x/1/abc", sema.ErrFenced, sema.ErrDeadlinePassed)
	notFound := fmt.Errorf("nosuch: %w", unitrun.ErrNotFound)
	notExec := fmt.Errorf("./x: %w", unitrun.ErrNotExecutable)
	noScope := fmt.Errorf("x: not started: %w", unitrun.ErrScopeFailed)
	broke := errors.New("guardian went away")
	started := func(status int) unitrun.Result { return unitrun.Result{Started: true, ExitStatus: status} }
	killed := unitrun.Result{Started: true, ExitStatus: 128 + 9, Signal: syscall.SIGKILL}
	stopped := unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, Stopped: true}
	scopeStopped := unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, ScopeStopped: true}
	overran := unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, RuntimeExceeded: true}
	interrupted := func(sig syscall.Signal) unitrun.Result {
		return unitrun.Result{Started: true, ExitStatus: 128 + int(sig), Signal: sig}
	}
	const limit = "--runtime-max 1s"

	for _, tc := range []struct {
		name    string
		h       holding
		requeue bool
		ran     bool
		status  int
		sig     syscall.Signal
		state   string
		line    string // "" for none
		group   bool   // the signal goes to conch's process group
	}{
		{name: "exit 0", h: holding{res: started(0)}, ran: true},
		{name: "exit 3", h: holding{res: started(3)}, ran: true, status: 3},
		{name: "death by signal is 128+n", h: holding{res: killed}, ran: true, status: 137},
		{name: "no status: guardian lost while the child ran", h: holding{res: started(-1)}, ran: true, status: exitSlotLost},
		{name: "supervision failed after exit 0", h: holding{res: started(0), runErr: broke}, ran: true, status: 0,
			state: stateReleased, line: "guardian went away"},
		{name: "stopped by signal", h: holding{res: stopped, cause: sigterm}, sig: syscall.SIGTERM,
			state: stateReleased, line: "SIGTERM: stopped the child and released the slot"},
		{name: "scope stopped while conch got a signal", h: holding{res: scopeStopped, cause: sigterm}, sig: syscall.SIGTERM,
			state: stateReleased, line: "SIGTERM: stopped the child and released the slot"},
		{name: "killed while conch got a signal", h: holding{res: killed, cause: sigterm}, sig: syscall.SIGTERM,
			state: stateReleased, line: "SIGTERM: stopped the child and released the slot"},
		{name: "ended on its own as the signal came", h: holding{res: started(0), cause: sigterm}, ran: true, sig: syscall.SIGTERM},
		{name: "slot lost: lease", h: holding{res: stopped, cause: lost}, status: exitSlotLost,
			state: stateLost, line: "slot lost while the child ran (" + lost.Error() + "): child stopped"},
		{name: "slot lost: fenced", h: holding{res: stopped, cause: fenced}, status: exitSlotLost,
			state: stateLost, line: "slot lost while the child ran (" + fenced.Error() + "): child stopped"},
		{name: "slot lost: key deleted", h: holding{res: stopped, cause: deleted}, status: exitSlotLost,
			state: stateLost, line: "slot lost while the child ran (" + deleted.Error() + "): child stopped"},
		{name: "slot lost past the deadline (D7b)", h: holding{res: unitrun.Result{Started: true, ExitStatus: 137, Signal: syscall.SIGKILL, Stopped: true}, cause: late}, status: exitSlotLost,
			state: stateLost, line: "slot lost while the child ran (" + late.Error() + "): child killed at once, without the --kill-after grace"},
		{name: "fenced by the guardian while conch was stalled (D7b)", h: holding{res: unitrun.Result{Started: true, ExitStatus: 137, Signal: syscall.SIGKILL, Fenced: true}},
			status: exitSlotLost, state: stateLost, line: guardianFenced},
		{name: "fenced by the guardian, then conch found the slot lost (D7b)", h: holding{res: unitrun.Result{Started: true, ExitStatus: 137, Signal: syscall.SIGKILL, Fenced: true, Stopped: true}, cause: late},
			status: exitSlotLost, state: stateLost, line: guardianFenced + " (" + late.Error() + ")"},
		{name: "slot lost after the child ended", h: holding{res: started(4), cause: lost}, ran: true, status: 4},
		{name: "runtime limit", h: holding{res: overran, limit: limit}, status: exitRuntimeMax,
			state: stateReleased, line: "child ran past --runtime-max 1s: stopped"},
		{name: "runtime limit of the scope", h: holding{res: overran, limit: "-p RuntimeMaxSec=5s"}, status: exitRuntimeMax,
			state: stateReleased, line: "child ran past -p RuntimeMaxSec=5s: stopped"},
		{name: "not found", h: holding{runErr: notFound}, status: exitNotFound, state: stateReleased, line: notFound.Error()},
		{name: "not executable", h: holding{runErr: notExec}, status: exitCannotExec, state: stateReleased, line: notExec.Error()},
		{name: "not found, slot lost too", h: holding{runErr: notFound, cause: lost}, status: exitNotFound, state: stateReleased, line: notFound.Error()},
		{name: "scope required and not made", h: holding{runErr: noScope}, status: exitUnavailable, state: stateReleased, line: noScope.Error()},
		{name: "not started: signal", h: holding{runErr: context.Canceled, cause: sigterm}, sig: syscall.SIGTERM, state: stateReleased, line: context.Canceled.Error()},
		{name: "Ctrl-C in a terminal: the child's SIGINT", h: holding{res: interrupted(syscall.SIGINT), terminal: true}, ran: true, sig: syscall.SIGINT, group: true,
			state: stateReleased, line: "the child died of SIGINT from the terminal: released the slot, stopping with it"},
		{name: "Ctrl-\\ in a terminal: the child's SIGQUIT", h: holding{res: interrupted(syscall.SIGQUIT), terminal: true}, ran: true, sig: syscall.SIGQUIT, group: true,
			state: stateReleased, line: "the child died of SIGQUIT from the terminal: released the slot, stopping with it"},
		{name: "SIGINT without a terminal is 130", h: holding{res: interrupted(syscall.SIGINT)}, ran: true, status: 130},
		{name: "SIGTERM in a terminal is 143", h: holding{res: interrupted(syscall.SIGTERM), terminal: true}, ran: true, status: 143},
		{name: "slot lost before start: re-queue", h: holding{runErr: noScope, cause: lost}, requeue: true},
		{name: "slot lost before start, no error: re-queue", h: holding{cause: deleted}, requeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := outcome(tc.h)
			if v.requeue != tc.requeue || v.ran != tc.ran {
				t.Fatalf("requeue %v ran %v, want %v %v", v.requeue, v.ran, tc.requeue, tc.ran)
			}
			status, sig := exitStatus(v.err)
			if status != tc.status || sig != tc.sig {
				t.Errorf("exit %d signal %v, want %d %v", status, sig, tc.status, tc.sig)
			}
			var xe *exitError
			state, line := "", ""
			if errors.As(v.err, &xe) {
				state, line = xe.state, xe.msg
			}
			if state != tc.state || line != tc.line {
				t.Errorf("line %q in state %q, want %q in %q", line, state, tc.line, tc.state)
			}
			if g := signalsGroup(v.err); g != tc.group {
				t.Errorf("signal to the process group %v, want %v", g, tc.group)
			}
		})
	}
}

// D13: a run whose slot is kept after it ends says so in its last line and journal state
// (HELD_AFTER, never RELEASED), whatever ended it: a signal to conch, the run-time limit, a
// Ctrl-C from the terminal; the exit is the same as without the hold.
func TestOutcomeKept(t *testing.T) {
	until := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	stopped := unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, Stopped: true}
	for _, tc := range []struct {
		name   string
		h      slotrun.Holding
		status int
		sig    syscall.Signal
		line   string
	}{
		{"SIGTERM", slotrun.Holding{Result: stopped, Cause: errSignal{syscall.SIGTERM}}, 0, syscall.SIGTERM,
			"SIGTERM: stopped the child; the slot is kept until 2026-12-02T04:00:00Z"},
		{"run-time limit", slotrun.Holding{Result: unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, RuntimeExceeded: true}}, exitRuntimeMax, 0,
			"child ran past --runtime-max 1s: stopped; the slot is kept until 2026-12-02T04:00:00Z"},
		{"Ctrl-C", slotrun.Holding{Result: unitrun.Result{Started: true, ExitStatus: 130, Signal: syscall.SIGINT}, Terminal: true}, 0, syscall.SIGINT,
			"the child died of SIGINT from the terminal: the slot is kept until 2026-12-02T04:00:00Z, stopping with it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := slotrun.Decide(tc.h)
			o.KeptUntil = until
			v := endOf(o, "--runtime-max 1s")
			var xe *exitError
			if !errors.As(v.err, &xe) || xe.state != stateHeldAfter || xe.msg != tc.line {
				t.Fatalf("%#v, want %q in state %s", v.err, tc.line, stateHeldAfter)
			}
			if status, sig := exitStatus(v.err); status != tc.status || sig != tc.sig {
				t.Errorf("exit %d signal %v, want %d %v", status, sig, tc.status, tc.sig)
			}
		})
	}
}

// exitStatus is the one mapping from a run's error to conch's exit (D3).
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		sig    syscall.Signal
	}{
		{"nil", nil, exitOK, 0},
		{"the child's status", childExit(3), 3, 0},
		{"no slot, with its line", noSlot(exitConflict, "no slot"), exitConflict, 0},
		{"-E's status, silent", noSlot(9, ""), 9, 0},
		{"a signal", signalExit(syscall.SIGINT, "", ""), 0, syscall.SIGINT},
		{"wrapped", fmt.Errorf("x: %w", endf(errSlotLost, stateLost, "lost")), exitSlotLost, 0},
		{"no holder", silent(errEmpty), exitEmpty, 0},
		{"listing not written", endf(errWhoOutput, "", "x"), exitSoftware, 0},
		{"run-time limit", endf(errRuntimeMax, stateReleased, "x"), exitRuntimeMax, 0},
		{"not found", endf(fmt.Errorf("x: %w", unitrun.ErrNotFound), "", "x"), exitNotFound, 0},
		{"not executable", endf(fmt.Errorf("x: %w", unitrun.ErrNotExecutable), "", "x"), exitCannotExec, 0},
		{"unavailable", endf(errUnavailable, "", "x"), exitUnavailable, 0},
		{"help without a command", silent(errUsage), exitUsage, 0},
		{"usage", usagef("bad"), exitUsage, 0},
		{"etcd unreachable at start", fmt.Errorf("%w: cannot reach etcd", etcdconn.ErrUnreachable), exitUnavailable, 0},
		{"who: etcd unreachable", fmt.Errorf("n: %w", fmt.Errorf("%w: x", etcdconn.ErrUnreachable)), exitUnavailable, 0},
		{"a refused login or bad TLS files", errors.New("cannot set up TLS"), exitUsage, 0},
		{"a name sema refuses", schema.ErrBadName, exitUsage, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, sig := exitStatus(tc.err); status != tc.status || sig != tc.sig {
				t.Errorf("exitStatus(%v) = %d, %v; want %d, %v", tc.err, status, sig, tc.status, tc.sig)
			}
		})
	}
}

// waitFailed: the end of a wait without a slot follows sema's one verdict (*sema.WaitError);
// cmd does not re-derive 75 vs 69 (D3).
func TestWaitFailed(t *testing.T) {
	j := job{name: "x", max: 2, wait: time.Second, run: runValues{conflict: 9}, conn: etcdconn.Settings{Endpoints: []string{"127.0.0.1:1"}, EndpointsFrom: "ETCDCTL_ENDPOINTS", DialTimeout: time.Second, DialTimeoutFrom: "--dial-timeout"}}
	refused := fmt.Errorf("%w: x: permission denied", sema.ErrRefused)
	for _, tc := range []struct {
		name   string
		err    error
		status int
		line   string
	}{
		{"refused", refused, exitUsage, refused.Error() + " (check --user, --password-file and the user's permissions on /conch/v1/sema/x/)"},
		{"nonblock, etcd answered", &sema.WaitError{Name: "x", Max: 2, Nonblock: true}, 9, "no free slot: all 2 held, and not waiting (--nonblock or --wait 0)"},
		{"wait ran out, etcd answered", &sema.WaitError{Name: "x", Max: 2}, 9, "no slot within --wait 1s"},
		{"wait ran out, etcd unreachable", &sema.WaitError{Name: "x", Max: 2, Unreachable: true, Err: context.DeadlineExceeded}, exitUnavailable,
			"no slot within --wait 1s, and etcd at 127.0.0.1:1 (from ETCDCTL_ENDPOINTS) is unreachable: etcd unavailable: x: context deadline exceeded"},
		{"nonblock, etcd unreachable", &sema.WaitError{Name: "x", Max: 2, Nonblock: true, Unreachable: true, Err: errors.New("cannot revoke lease 1")}, exitUnavailable,
			"no answer from etcd at 127.0.0.1:1 (from ETCDCTL_ENDPOINTS) within the dial timeout 1s (from --dial-timeout), although it accepts connections (not an etcd, a TLS etcd reached with http://, or a cluster without a leader?): etcd unavailable: x: cannot revoke lease 1"},
		{"unreachable at start", fmt.Errorf("%w: x: deadline", sema.ErrUnavailable), exitUnavailable,
			"no answer from etcd at 127.0.0.1:1 (from ETCDCTL_ENDPOINTS) within the dial timeout 1s (from --dial-timeout), although it accepts connections (not an etcd, a TLS etcd reached with http://, or a cluster without a leader?): etcd unavailable: x: deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := waitFailed(j, &slotrun.NoSlotError{Err: tc.err})
			var xe *exitError
			if status, _ := exitStatus(err); !errors.As(err, &xe) || status != tc.status || xe.msg != tc.line || xe.state != stateTimeout {
				t.Fatalf("got %#v, want status %d line %q", err, tc.status, tc.line)
			}
		})
	}
	for _, tc := range []struct {
		enqueued bool // etcd answered our enqueue
		line     string
	}{{false, "SIGHUP while connecting to etcd: nothing was queued"}, {true, "SIGHUP while waiting: left the queue"}} {
		err := waitFailed(j, &slotrun.NoSlotError{Err: &sema.WaitError{Name: "x", Max: 2}, Signal: syscall.SIGHUP, Enqueued: tc.enqueued})
		var xe *exitError
		if _, sig := exitStatus(err); sig != syscall.SIGHUP || !errors.As(err, &xe) || xe.msg != tc.line {
			t.Fatalf("a signal, enqueued %v: %#v, want SIGHUP and %q", tc.enqueued, err, tc.line)
		}
	}
}

// The exit 124 line names the limit that fired: -p RuntimeMaxSec= wins over --runtime-max in
// a scope (it said --runtime-max 10s when -p RuntimeMaxSec=5s fired).
func TestRuntimeLimitNamed(t *testing.T) {
	for _, tc := range []struct {
		props []string
		flag  time.Duration
		want  string
	}{
		{nil, 10 * time.Second, "--runtime-max 10s"},
		{[]string{"RuntimeMaxSec=5s"}, 10 * time.Second, "-p RuntimeMaxSec=5s"},
		{[]string{"RuntimeMaxSec=90"}, 0, "-p RuntimeMaxSec=1m30s"},
		{[]string{"MemoryMax=1G"}, time.Second, "--runtime-max 1s"},
	} {
		f, err := parseScopeFlags("", tc.props, "")
		if err != nil {
			t.Fatal(err)
		}
		opts := f.opts
		opts.RuntimeMax = tc.flag
		if got := runtimeLimit(planTiming(t, opts)); got != tc.want {
			t.Errorf("%q with --runtime-max %v: %q, want %q", tc.props, tc.flag, got, tc.want)
		}
	}
}

// report is the one place that writes why conch ends: one journal entry with the run's
// CONCH_* fields and the stage's CONCH_STATE (D10), and STOPPING=1 with the same line;
// nothing for a silent exit (the child's own status).
func TestReportOneLine(t *testing.T) {
	var f fakeSinks
	r, buf := f.reporter(false, true)
	r.rev = 41
	report(r, endf(errSlotLost, stateLost, "slot lost while the child ran (lease lost): child stopped"))
	report(r, childExit(3))
	report(r, nil)
	if len(f.entries) != 1 || buf.Len() != 0 {
		t.Fatalf("entries %+v, stderr %q: want one journal entry and no stderr", f.entries, buf.String())
	}
	e := f.entries[0]
	if e.msg != "heavy-jobs[max=2]: slot lost while the child ran (lease lost): child stopped" || e.prio != journal.PriErr ||
		e.fields["CONCH_STATE"] != stateLost || e.fields["CONCH_SEMA"] != "heavy-jobs" || e.fields["CONCH_REV"] != "41" {
		t.Fatalf("entry %+v", e)
	}
	if len(f.notes) != 1 || !strings.HasPrefix(f.notes[0], "STOPPING=1\nSTATUS=heavy-jobs[max=2]: slot lost") {
		t.Fatalf("notify %q", f.notes)
	}

	// before a semaphore was named (a usage error), and --who: "conch: <line>"
	b, buf := (&fakeSinks{}).reporter(false, false)
	b.bare = true
	report(b, usagef("unknown command %q: conch's commands are sema and fleetlock", "x"))
	if got := buf.String(); got != "conch: unknown command \"x\": conch's commands are sema and fleetlock\n" {
		t.Fatalf("bare line %q", got)
	}
}
