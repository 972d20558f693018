package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/coreos/go-systemd/v22/journal"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The flags for the jobs fleets put behind a semaphore: --hold-after and
// --release (rolling reboots), and their checks. Every check happens before
// any etcd call (D3: 64 means nothing was written).

// stateHeldAfter is CONCH_STATE when the slot is kept after the run (D13).
const stateHeldAfter = "HELD_AFTER"

// maxReason bounds --pause --reason, in bytes: the reason is printed on every waiter's line,
// --nonblock's refusal and --who; 1 KiB is several lines of text. (A record of 64 KiB was
// written, then read back as unreadable.)
const maxReason = 1024

// fleetValues are the fleet flags' values, decided at validation (fleetExecute) and carried
// by the job: nothing reads the flags after it.
type fleetValues struct {
	holdAfter time.Duration // --hold-after; 0: release at the end of the run
	oncePer   time.Duration // --once-per; 0: every run runs
	deadline  time.Time     // --deadline; zero: none
	// deadlineText is --deadline as messages show it: as the operator wrote it (a time before
	// 1970 is kept as 1970 but shown as given), with the time it stands for after an HH:MM[:SS]
	deadlineText string
}

// rules are the values as sema's rules of the job's runs.
func (f fleetValues) rules() sema.RunRules {
	return sema.RunRules{HoldAfter: f.holdAfter, OncePer: f.oncePer, Deadline: f.deadline}
}

// fleetExecute is Execute's hook for the fleet flags: it sets the run for --release,
// --pause or --resume and reports handled, or checks that the fleet flags given fit the run
// (or --who) that Execute goes on to set up, and sets j.fleet. Errors are usage errors.
func (c *semaCmd) fleetExecute(j *job) (handled bool, err error) {
	if c.Reason != "" && !c.Pause {
		return true, usagef("--reason goes with --pause")
	}
	if len(c.Reason) > maxReason { // refused before anything is written
		return true, usagef("--reason is %d bytes: at most %d (a line for waiters and --who; put more in a ticket and name it)", len(c.Reason), maxReason)
	}
	for _, a := range []struct {
		flag string
		set  bool
		run  func(job) error
	}{{"--release", c.Release, c.release}, {"--pause", c.Pause, c.pause}, {"--resume", c.Resume, c.resume}, {"--reset-period", c.ResetPeriod, c.resetPeriod}} {
		if !a.set {
			continue
		}
		if err := c.checkAlone(a.flag, *j); err != nil {
			return true, err
		}
		run, jv := a.run, *j
		if jv.node, err = c.fleetNode(a.flag); err != nil {
			return true, err
		}
		c.setRun(jv, func() error { return run(jv) })
		return true, nil
	}
	return false, c.checkFleet(j, time.Now())
}

// fleetNode is the node of --release, which frees what that node holds after a run, checked
// as a run's (nodeName, D11a); --pause and --resume only name it in the pause's who, as given,
// so a CONCH_NODE that is no node name does not stop them.
func (c *semaCmd) fleetNode(flag string) (string, error) {
	if flag == "--release" {
		return nodeName(c.Node, true)
	}
	return c.Node.String(), nil
}

// checkFleet checks the fleet flags of a run (D13, D15, the window) and sets j.fleet: each
// goes with running a command, --hold-after and --once-per must be more than 0, --once-per
// needs --max 1 (one run at a time is what makes "once" hold), --deadline excludes the other
// bounds of the wait and must read as a time against now (sema.ParseDeadline; one already
// passed is decided when the run starts). Errors are usage errors (64).
func (c *semaCmd) checkFleet(j *job, now time.Time) error {
	for _, f := range []flagGiven{{"--once-per", c.OncePer.set}, {"--deadline", c.Deadline != ""}, {"--hold-after", c.HoldAfter.set}} {
		if f.set && c.Who {
			return usagef("%s goes with running a command, not with --who", f.flag)
		}
	}
	switch given := c.Deadline != ""; {
	case c.OncePer.set && c.OncePer.d <= 0:
		return usagef("--once-per must be more than 0 (whole seconds, rounded up): it is the period")
	case c.OncePer.set && j.max != 1:
		return usagef("--once-per needs --max 1: one run at a time is what makes one run per period hold")
	case given && c.Wait.set:
		return usagef("--deadline and --wait exclude each other: both bound the wait")
	case given && c.Nonblock:
		return usagef("--deadline and --nonblock exclude each other: --nonblock does not wait")
	case c.HoldAfter.set && c.HoldAfter.d <= 0:
		return usagef("--hold-after must be more than 0 (whole seconds, rounded up): it is how long the slot stays taken after the command")
	case given:
		if _, err := time.Parse(time.RFC3339, strings.TrimSpace(c.Deadline.String())); err != nil { // HH:MM: in TZ's zone
			loc, err := deadlineZone(c.getenv("TZ"))
			if err != nil {
				return usagef("--deadline: %v", err)
			}
			now = now.In(loc)
		}
		d, err := sema.ParseDeadline(c.Deadline.String(), now)
		if err != nil {
			return usagef("--deadline: %v", err)
		}
		j.fleet.deadline, j.fleet.deadlineText = d, deadlineText(c.Deadline.String(), d)
	}
	j.fleet.holdAfter, j.fleet.oncePer = c.HoldAfter.d, c.OncePer.d
	return nil
}

// deadlinePassed is the end of a run whose --deadline has passed by now, before any etcd
// request: no slot (conflict, 75 or -E), saying so; nil when there is none or it is ahead.
func (f fleetValues) deadlinePassed(conflict int, now time.Time) error {
	if !f.rules().DeadlinePassed(now) {
		return nil
	}
	return noSlot(conflict, "--deadline %s has passed: not waiting, the command was not started", f.deadlineText)
}

// deadlineText is --deadline given, which sema.ParseDeadline read as d, for messages: given
// as written when it is RFC 3339, else (HH:MM[:SS]) followed by d in RFC 3339 (D15a).
func deadlineText(given string, d time.Time) string {
	given = strings.TrimSpace(given)
	if _, err := time.Parse(time.RFC3339, given); err == nil {
		return given
	}
	return given + " (" + d.Format(time.RFC3339) + ")"
}

// checkAlone checks the flags of a command that runs no child and waits for
// no slot (--release, --pause, --resume): it needs --max, takes no command,
// and refuses the flags of a run, which it would ignore.
func (c *semaCmd) checkAlone(what string, j job) error {
	switch {
	case j.max == 0:
		return usagef("%s needs --max N: the capacity is part of the semaphore's name", what)
	case c.dashdash:
		return usagef("%s takes no command", what)
	}
	for _, o := range c.runFlags() {
		if o.set && o.flag != what && o.flag != "--reason" { // --reason without --pause: fleetExecute
			return usagef("%s and %s exclude each other", what, o.flag)
		}
	}
	return nil
}

// flagGiven is a flag as a refusal names it, and whether it was given.
type flagGiven struct {
	flag string
	set  bool
}

// runFlags are the flags that the commands standing alone (--held, --release, --pause,
// --resume) refuse beside them, in the order a refusal names them.
func (c *semaCmd) runFlags() []flagGiven {
	return []flagGiven{{"--who", c.Who}, {"--release", c.Release}, {"--pause", c.Pause}, {"--resume", c.Resume}, {"--reset-period", c.ResetPeriod}, {"--reason", c.Reason != ""},
		{"--once-per", c.OncePer.set}, {"--deadline", c.Deadline != ""}, {"--hold-after", c.HoldAfter.set}, {"--wait", c.Wait.set},
		{"--nonblock", c.Nonblock}, {"--spread", c.Spread}, {"--runtime-max", c.RuntimeMax.set},
		{"-p", len(c.Property) > 0}, {"--slice", c.Slice != ""}, {"--json", c.JSON},
		{"--format", c.Format != ""}, {"--textfile", c.Textfile != ""}, {"--watch", c.Watch}}
}

// hostName is this node's name for the holder record, --hold-after and
// --release: --node / CONCH_NODE, else the kernel hostname (D11, D14).
func (j job) hostName() string {
	if j.node != "" {
		return j.node
	}
	host, _ := os.Hostname()
	return host
}

// heldAfter records that the slot is kept after the run (D13), on stderr (or
// the journal, CONCH_STATE=HELD_AFTER) and in STATUS=.
func (r *reporter) heldAfter(ha sema.HeldAfter, status int) {
	msg := fmt.Sprintf("command exited with status %d; slot kept for %v after the run, until %s, by node %s (rev %d): "+
		"`conch sema %s --max %d --release --node %s` frees it sooner",
		status, ha.TTL, ha.Until.Format(time.RFC3339), ha.Node, ha.Rev, r.name, r.max, ha.Node)
	r.emit(stateHeldAfter, journal.PriNotice, false, map[string]string{"CONCH_HELD_UNTIL": ha.Until.Format(time.RFC3339), "CONCH_NODE": ha.Node}, msg)
	r.sendNotify(fmt.Sprintf("STOPPING=1\nSTATUS=%s: slot kept after the run until %s (node %s)", r.prefix(), ha.Until.Format(time.RFC3339), ha.Node))
}

// release is --release (D14): it frees the slots this node holds after a
// run and says which, or that there were none, and warns of those it leaves
// alone as of a newer record format (D14a). Exit 0 either way; 69 when
// etcd does not answer, 64 when it refuses (D3).
func (c *semaCmd) release(j job) error {
	node := j.hostName()
	return c.withClient(j, "--release", func(ctx context.Context, cl *clientv3.Client) error {
		if err := c.checkCapacity(ctx, cl, j, "--release refused"); err != nil { // D17
			return err
		}
		rel, err := sema.ReleaseHeldReport(ctx, cl, j.name, j.max, node)
		for _, ha := range rel.Freed {
			c.rep.line(stateReleased, false, "released the slot node %s held after its run (rev %d, run ended %s)",
				ha.Node, ha.Rev, timeOrUnknown(ha.Ended))
		}
		for _, ha := range rel.Left { // D14a: a newer conch's record is not ours to judge
			c.rep.warnf("WARNING: left %q alone (rev %d): its record names node %q and says held after a run, but in a newer format than this conch reads; "+
				"a newer conch's --release frees it, or etcdctl del if you know it is free", ha.Key, ha.Rev, ha.Node)
		}
		if err == nil && len(rel.Freed) == 0 && len(rel.Left) == 0 {
			c.rep.line("", false, "no slot held after a run by node %s: nothing to release%s", node, hintNote(ctx, cl, j.name))
		}
		return err
	})
}

// withClient connects to etcd as j says and runs op, bounded by the dial timeout, for the
// flags that read or change the semaphore without holding it (--release, --pause, --resume,
// --held). It returns op's end: nil, an *exitError op chose, 64 when etcd refuses
// (sema.ErrRefused), else 69 (D3), each with a line naming what.
func (c *semaCmd) withClient(j job, what string, op func(context.Context, *clientv3.Client) error) error {
	client, err := etcdconn.New(context.Background(), j.conn)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err) // 69 if etcd did not answer, else 64 (exitStatus)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), j.conn.DialTimeout)
	defer cancel()
	var xe *exitError
	switch err := op(ctx, client); {
	case errors.As(err, &xe):
		return err
	case errors.Is(err, sema.ErrRefused):
		return endf(errUsage, "", "%s: %s refused: %v", what, j.conn.Where(), err)
	case err != nil:
		return endf(errUnavailable, "", "%s: failed on %s: %v", what, j.conn.Where(), err)
	}
	return nil
}

// timeOrUnknown is t in RFC 3339, UTC, or "at an unknown time" when zero (a
// record that lacks it, or whose value cannot be read).
func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// markerEnd is when a period marker whose lease etcd said has left to live, read before now,
// ends at the latest, in whole seconds (D15a): etcd truncates a lease's remaining TTL to the
// second, so the lease ends before now + left + 1 s, rounded up to the second so that the
// time shown is never before the marker's real end.
func markerEnd(now time.Time, left time.Duration) time.Time {
	end := now.Add(left + time.Second)
	if t := end.Truncate(time.Second); t.Before(end) {
		return t.Add(time.Second)
	}
	return end
}

// skipped records a run skipped because this period's run is done (D15):
// a line naming that run and when the next may start, CONCH_SKIPPED=1 in
// the journal, and STATUS=.
func (r *reporter) skipped(m sema.OnceMarker) {
	var ran, next string
	if m.Err != nil {
		ran = fmt.Sprintf("a period marker that cannot be read (%v: %s) counts as this period's run", m.Err, strconv.QuoteToASCII(m.Raw))
	} else {
		ran = fmt.Sprintf("this period's run is done: node %s ran it (rev %d) from %s to %s", who.SafeText(m.Node), m.Rev,
			m.Start.UTC().Format(time.RFC3339), m.End.UTC().Format(time.RFC3339))
	}
	if m.Left < 0 {
		next = fmt.Sprintf("the marker has no lease, so no run starts until it is deleted (etcdctl del %s)", m.Key)
	} else {
		now := time.Now()
		at := markerEnd(now, m.Left)
		next = fmt.Sprintf("the next run may start after %s (in %v)", at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second))
	}
	msg := "skipped: " + ran + "; " + next
	r.emit(stateReleased, journal.PriNotice, false, map[string]string{"CONCH_SKIPPED": "1"}, msg)
	r.sendNotify("STOPPING=1\nSTATUS=" + r.prefix() + ": " + msg)
}
