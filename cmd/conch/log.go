package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/coreos/go-systemd/v22/journal"
)

// Transition states (D10: the CONCH_STATE journal field).
const (
	stateWait     = "WAIT"
	stateHeld     = "HELD"
	stateReleased = "RELEASED"
	stateTimeout  = "TIMEOUT"
	stateLost     = "LOST"
)

// reporter is the one place that tells the operator and the service manager
// what conch does with one semaphore (D10). Libraries do not log:
// sema reports through Options.OnEvent and unitrun through Spec.Started, and
// this turns their events into
//   - native journal entries with CONCH_SEMA, CONCH_MAX, CONCH_REV and
//     CONCH_STATE fields when stderr is the journal (systemd.JournalFor); every
//     transition is recorded there, debug lines only with -v;
//   - otherwise one plain line per transition on stderr, HELD and RELEASED
//     only with -v;
//   - and, under NOTIFY_SOCKET, STATUS= on every transition (with the queue
//     position while waiting), READY=1 once the command runs, STOPPING=1 when
//     conch starts to shut down.
//
// Its methods are called from one goroutine at a time, except stopping,
// which only notifies and may be called from any goroutine.
type reporter struct {
	w        io.Writer
	verbose  bool
	warnOnly bool // -q: on stderr, only warnings and errors (semaCmd.reporter)
	name     string
	max      int
	bare     bool // lines are "conch: <msg>", without the semaphore (usage errors, --who)
	rev      int64
	lease    int64
	ahead    int
	waiting  bool
	nodeBusy bool   // waiting for this node's own key to go (--spread, D11)
	paused   string // waiting on a pause: who, when, why (D16, who.PauseText); "" for none
	// unreachable: waiting while etcd does not answer our lease's keep-alives (D7g)
	unreachable bool
	journal     systemd.JournalSend // nil: plain lines on w
	unit        map[string]string   // journal fields naming conch's unit (systemd.UnitFields)
	scope       string              // the child's scope once it runs in one (D8), for STATUS=
	notify      systemd.NotifyFunc  // nil: no service manager listens
}

// newReporter returns the reporter for semaphore name[max], writing plain
// lines to stderr unless stderr is the journal (systemd.JournalFor), and notifying
// systemd when NOTIFY_SOCKET is set (notifierFor). getenv is os.Getenv
// outside tests. With warnOnly set (-q, semaCmd.reporter) it prints only
// warnings and errors; the journal and sd_notify get what they get without -q.
func newReporter(stderr io.Writer, getenv func(string) string, verbose bool, name string, max int) *reporter {
	r := &reporter{w: stderr, verbose: verbose, name: name, max: max,
		journal: systemd.JournalFor(stderr), notify: systemd.NotifierFor(getenv)}
	if r.journal != nil {
		r.unit = systemd.UnitFields()
	}
	return r
}

// prefix names the semaphore in every line: "heavy-jobs[max=2]", the one way conch names
// a semaphore (D6d); counts, such as holders over capacity, are written apart.
func (r *reporter) prefix() string { return fmt.Sprintf("%s[max=%d]", r.name, r.max) }

// emit records one message. In the journal, an entry with a state is always
// written and one without (debug detail) only with -v; on stderr a quiet
// message needs -v either way, and with -q (warnOnly) only warnings and
// errors print. If journald cannot be reached the message
// falls back to a plain line, so nothing is lost.
func (r *reporter) emit(state string, prio journal.Priority, quiet bool, extra map[string]string, msg string) {
	if !r.bare {
		msg = r.prefix() + ": " + msg
	}
	if r.journal != nil {
		if quiet && state == "" && !r.verbose {
			return
		}
		if err := r.journal(msg, prio, r.journalFields(state, extra)); err == nil {
			return
		}
	}
	if quiet && !r.verbose || r.warnOnly && prio > journal.PriWarning {
		return
	}
	fmt.Fprintf(r.w, "conch: %s\n", msg)
}

// sendNotify sends state to the service manager, if one listens, with the backslashes
// of its STATUS= text doubled (systemd.NotifyEscape).
func (r *reporter) sendNotify(state string) {
	if r.notify != nil {
		r.notify(systemd.NotifyEscape(state))
	}
}

// line writes one line about a transition; quiet ones only with -v (on
// stderr; in the journal every transition is kept, see emit).
func (r *reporter) line(state string, quiet bool, format string, args ...any) {
	prio := journal.PriNotice
	if quiet {
		prio = journal.PriInfo
		if state == "" {
			prio = journal.PriDebug
		}
	}
	r.emit(state, prio, quiet, nil, fmt.Sprintf(format, args...))
}

// warnf writes a warning that always prints (journal priority warning).
func (r *reporter) warnf(format string, args ...any) {
	r.emit("", journal.PriWarning, false, nil, fmt.Sprintf(format, args...))
}

// errorf writes the one line that says why conch exits with a status other
// than the child's (D3). It always prints, and tells the service manager
// conch is stopping and why. Journal priority: TIMEOUT (no slot: a
// skipped timer run is routine), RELEASED (stopped on request or by
// --runtime-max, or the command could not start) and HELD_AFTER (the same,
// the slot kept after the run) are warnings; LOST and
// the rest are errors.
func (r *reporter) errorf(state, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	prio := journal.PriErr
	if state == stateTimeout || state == stateReleased || state == stateHeldAfter {
		prio = journal.PriWarning
	}
	r.emit(state, prio, false, nil, msg)
	if !r.bare {
		msg = r.prefix() + ": " + msg
	}
	r.sendNotify("STOPPING=1\nSTATUS=" + msg)
}

// onEvent is sema.Options.OnEvent.
func (r *reporter) onEvent(e sema.Event) {
	switch e.Kind {
	case sema.Enqueued:
		r.rev, r.lease = e.Rev, int64(e.Lease)
		r.line("", true, "enqueued rev=%d lease=%s ttl=%v", e.Rev, schema.FormatLeaseID(int64(e.Lease)), e.TTL)
		if e.OtherCapacities > 0 {
			r.warnf("WARNING: %d key(s) exist for %q under another --max: those nodes use a different semaphore and do not count against this one (conch sema %s --who)",
				e.OtherCapacities, r.name, r.name)
		}
		if e.OtherKind > 0 { // D11
			r.warnf("WARNING: %d key(s) of %s[max=%d] come from jobs run the other way (with and without --spread): mixed on one semaphore, one slot per node does not hold (conch sema %s --who)",
				e.OtherKind, r.name, r.max, r.name)
		}
	case sema.Waiting:
		first := !r.waiting
		r.waiting = true
		paused := pausedText(e.Paused)
		// the place moving in the queue is told with -v; etcd going silent or answering again,
		// and a pause set or lifted, are told always: they change what the operator waits for
		news := paused != r.paused || e.Unreachable != r.unreachable
		changed := news || e.Ahead != r.ahead || e.NodeBusy != r.nodeBusy
		r.ahead, r.nodeBusy, r.paused, r.unreachable = e.Ahead, e.NodeBusy, paused, e.Unreachable
		if first || changed {
			r.emit(stateWait, journal.PriNotice, !first && !news, map[string]string{"CONCH_AHEAD": strconv.Itoa(e.Ahead)}, r.waitText())
			r.sendNotify("STATUS=" + r.waitText())
		}
	case sema.Held:
		r.rev, r.lease = e.Rev, int64(e.Lease)
		r.line(stateHeld, true, "slot held, rev=%d (fencing token)", e.Rev)
		r.sendNotify(fmt.Sprintf("STATUS=holding %s, rev %d: starting the command", r.prefix(), e.Rev))
	case sema.Reentering:
		r.waiting = false
		r.line(stateWait, false, "lost our place in the queue (%v): re-entering at the back", e.Err)
		r.sendNotify(fmt.Sprintf("STATUS=re-entering the queue of %s: %v", r.prefix(), e.Err))
	}
}

// waitText is the queue position as D10 words it, for the log line and
// sd_notify STATUS=: "waiting for heavy-jobs[max=2] (2/2 held), 3 ahead": the semaphore
// named as every line names it, the slots taken as a count (D6d).
func (r *reporter) waitText() string {
	if r.paused != "" { // D16
		return fmt.Sprintf("waiting for %s: %s (conch sema %s --max %d --resume lifts it)", r.prefix(), r.paused, r.name, r.max)
	}
	if r.nodeBusy {
		return fmt.Sprintf("waiting for %s: this node already holds or waits for a slot (--spread: one per node)", r.prefix())
	}
	if r.unreachable { // D7g: not "next in line" while etcd cannot say so
		return fmt.Sprintf("waiting for %s: etcd is not answering (no connection, or etcd stopped), connecting again; the place in the queue is kept while etcd keeps the lease", r.prefix())
	}
	if r.ahead == 0 {
		return fmt.Sprintf("waiting for %s (%d/%d held), next in line", r.prefix(), r.max, r.max)
	}
	return fmt.Sprintf("waiting for %s (%d/%d held), %d ahead", r.prefix(), r.max, r.max, r.ahead)
}

// started is unitrun.Spec.Started: the command runs, so a Type=notify
// service is now ready (D10).
func (r *reporter) started(pid int) {
	where := ""
	if r.scope != "" { // journalctl -u names it: the child's own journal entries, if any, and systemd's
		where = " in " + r.scope
	}
	r.line("", true, "command started, PID %d%s", pid, where)
	r.sendNotify(fmt.Sprintf("READY=1\nSTATUS=holding %s, rev %d: command running (PID %d%s)", r.prefix(), r.rev, pid, where))
}

// stopping says, and tells the service manager, that conch has begun to stop the command
// because of why (the slot is being lost: D7). Safe from any goroutine.
func (r *reporter) stopping(why error) {
	// told at once, without -v too: the line that ends the run may come only once the release
	// gives up, seconds after the command was stopped
	r.warnf("the slot is being lost (%v): stopping the command", why)
	r.sendNotify(fmt.Sprintf("STOPPING=1\nSTATUS=%s: stopping the command: %v", r.prefix(), why))
}

// released records the clean end: the command exited with status (D3) after
// holding the slot for held, and the slot was given back.
func (r *reporter) released(status int, held time.Duration) {
	held = held.Round(time.Millisecond)
	r.emit(stateReleased, journal.PriInfo, true, map[string]string{"CONCH_EXIT_STATUS": strconv.Itoa(status)},
		fmt.Sprintf("released after %v, child status %d", held, status))
	r.sendNotify(fmt.Sprintf("STOPPING=1\nSTATUS=released %s after %v, command exited with status %d", r.prefix(), held, status))
}

// journalIdentifier is SYSLOG_IDENTIFIER of conch's native journal entries,
// so `journalctl -t conch` and `systemctl status` name them like the
// plain lines journald would otherwise have recorded.
const journalIdentifier = "conch"

// journalFields are the fields of one of conch's entries (D10): CONCH_SEMA
// and CONCH_MAX once known, CONCH_REV once the key exists, CONCH_STATE on
// transitions, plus what the state adds (CONCH_AHEAD while waiting,
// CONCH_EXIT_STATUS on release).
func (r *reporter) journalFields(state string, extra map[string]string) map[string]string {
	f := map[string]string{"SYSLOG_IDENTIFIER": journalIdentifier}
	if r.name != "" { // "" for a usage error before the name was read
		f["CONCH_SEMA"] = r.name
	}
	if r.max != 0 { // 0 for --who without --max
		f["CONCH_MAX"] = strconv.Itoa(r.max)
	}
	if r.rev != 0 {
		f["CONCH_REV"] = strconv.FormatInt(r.rev, 10)
	}
	if r.lease != 0 {
		f["CONCH_LEASE"] = schema.FormatLeaseID(r.lease)
	}
	if state != "" {
		f["CONCH_STATE"] = state
	}
	for k, v := range r.unit {
		f[k] = v
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}
