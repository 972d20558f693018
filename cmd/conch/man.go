package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/jessevdk/go-flags"
)

// writeManPage writes conch(1) in roff to w (`conch --man-page`, hidden;
// `make man` runs it). The options come from the go-flags parser p
// (Parser.WriteManPage), so the page cannot drift from --help; conch adds
// the synopsis, the description, and the EXIT STATUS (from exitTable, D3),
// ENVIRONMENT (from the parser's env tags, D5, D9, D10), FILES, EXAMPLES
// and SEE ALSO sections. The date honours SOURCE_DATE_EPOCH (reproducible
// builds). p is modified: build a fresh one (newParser).
func writeManPage(w io.Writer, p *flags.Parser) error {
	sema := p.Find("sema")
	if sema == nil {
		return fmt.Errorf("cannot write the man page: no sema command in the parser")
	}
	// The command's descriptions become the page's DESCRIPTION; left on
	// the command, go-flags would print them twice.
	p.LongDescription = semaLong
	sema.ShortDescription, sema.LongDescription = "", ""

	var buf bytes.Buffer
	p.WriteManPage(&buf)
	page := buf.String()
	th, rest, _ := strings.Cut(page, "\n")
	page = th + fmt.Sprintf(" %q %q\n", "conch "+versionString(), "User Commands") + rest
	page = strings.Replace(page, "\\fBconch\\fP [OPTIONS]\n", manSynopsis, 1)
	page = strings.Replace(page, ".SS sema\n\n", ".SS sema\n", 1)
	page = strings.Replace(page, ".SH COMMANDS\n", ".SH COMMAND OPTIONS\n", 1)
	page = manDefaults(page, sema)
	if _, err := io.WriteString(w, page); err != nil {
		return err
	}
	_, err := io.WriteString(w, manExitStatus(exitTable)+manEnvironment(sema)+manTail)
	return err
}

// manSynopsis replaces go-flags' one-line "conch [OPTIONS]".
const manSynopsis = `.nf
\fBconch sema\fP \fIname\fP \fB\-\-max\fP \fIN\fP [\fB\-\-ttl\fP \fID\fP] [\fB\-\-wait\fP \fID\fP | \fB\-\-nonblock\fP] [\fB\-E\fP \fIN\fP]
           [\fB\-\-kill\-after\fP \fID\fP] [\fB\-\-runtime\-max\fP \fID\fP] [\fB\-\-spread\fP [\fB\-\-node\fP \fINAME\fP]]
           [\fIOPTIONS\fP] \fB\-\-\fP \fIcommand\fP [\fIarg\fP...]
\fBconch sema\fP \fIname\fP \fB\-\-max\fP \fIN\fP [\fB\-\-hold\-after\fP \fID\fP] [\fB\-\-once\-per\fP \fID\fP] [\fB\-\-deadline\fP \fITIME\fP] [\fIOPTIONS\fP] \fB\-\-\fP \fIcommand\fP [\fIarg\fP...]
\fBconch sema\fP \fIname\fP \fB\-\-max\fP \fIN\fP \fB\-\-release\fP [\fB\-\-node\fP \fINAME\fP]
\fBconch sema\fP \fIname\fP \fB\-\-max\fP \fIN\fP \fB\-\-pause\fP [\fB\-\-reason\fP \fITEXT\fP] | \fB\-\-resume\fP
\fBconch sema\fP \fIname\fP [\fB\-\-max\fP \fIN\fP] \fB\-\-who\fP [\fB\-\-json\fP]
\fBconch sema\fP \fB\-\-who\fP [\fB\-\-max\fP \fIN\fP] [\fB\-\-json\fP]
\fBconch sema\fP [\fIname\fP] [\fB\-\-max\fP \fIN\fP] \fB\-\-who\fP \fB\-\-watch\fP [\fB\-\-json\fP]
\fBconch sema\fP [\fIname\fP] [\fB\-\-max\fP \fIN\fP] \fB\-\-who\fP \fB\-\-format prometheus\fP [\fB\-\-textfile\fP \fIPATH\fP]
\fBconch sema\fP [\fIname\fP \fB\-\-max\fP \fIN\fP] \fB\-\-held\fP
\fBconch \-\-version\fP
.fi
`

// roffText escapes plain text for a roff body line: backslashes, ASCII
// hyphens (as \- so options copy and paste as typed) and a leading control
// character.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// manExitStatus turns exitTable (the one table, D3) into tagged
// paragraphs: a line indented by two spaces starts an entry ("status,
// two or more spaces, meaning"); a deeper indented line continues the
// meaning.
func manExitStatus(table string) string {
	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	lines := strings.Split(table, "\n")
	var tag, text string
	flush := func() {
		if tag != "" {
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", roffText(tag), roffText(text))
		}
	}
	for _, l := range lines[1:] {
		body := strings.TrimLeft(l, " ")
		switch indent := len(l) - len(body); {
		case body == "":
		case indent == 2:
			flush()
			i := strings.Index(body, "  ")
			if i < 0 {
				tag, text = body, ""
				continue
			}
			tag, text = body[:i], strings.TrimSpace(body[i:])
		default:
			text += " " + body
		}
	}
	flush()
	b.WriteString(".PP\nEvery exit other than the child's own status is preceded by one line on stderr (or one\n" +
		"journal entry) that names the semaphore and says why, except the no-slot status under \\fB-q\\fR,\n" +
		"which is silent by design, and a usage error (64 before any etcd call), whose line names the\n" +
		"flag, argument or file at fault instead.\n")
	return b.String()
}

// eachOption calls f for every visible option of g and its subgroups.
func eachOption(g *flags.Group, f func(*flags.Option)) {
	for _, o := range g.Options() {
		if !o.Hidden {
			f(o)
		}
	}
	for _, sub := range g.Groups() {
		eachOption(sub, f)
	}
}

// manDefaults puts each option's real default (its default-mask: the
// kernel hostname, 5s) where go-flags' man page writes "<default:
// $CONCH_X>" for an option with an env tag and no default tag (go-flags' own text would be wrong),
// and drops it where there is none (default-mask "-"). Help already uses
// the masks.
func manDefaults(page string, sema *flags.Command) string {
	eachOption(sema.Group, func(o *flags.Option) {
		if o.EnvDefaultKey == "" || len(o.Default) != 0 {
			return
		}
		env := ` <default: \fI$` + o.EnvDefaultKey + `\fR>`
		real := ""
		if o.DefaultMask != "" && o.DefaultMask != "-" {
			real = ` <default: \fI` + roffText(o.DefaultMask) + `\fR>`
		}
		page = strings.Replace(page, env, real, 1)
	})
	return page
}

// manEnvironment lists the variables conch reads and sets: the connection
// settings from the parser's env tags, then the fixed ones.
func manEnvironment(sema *flags.Command) string {
	var b strings.Builder
	b.WriteString(".SH ENVIRONMENT\n")
	eachOption(sema.Group, func(o *flags.Option) {
		if o.EnvDefaultKey == "" {
			return
		}
		def := ""
		if o.DefaultMask != "" && o.DefaultMask != "-" {
			def = " (default: " + roffText(o.DefaultMask) + ")"
		}
		fmt.Fprintf(&b, ".TP\n.B %s\nas \\fB\\-\\-%s\\fP: %s%s\n", o.EnvDefaultKey, roffText(o.LongName), roffText(o.Description), def)
	})
	b.WriteString(manEnvironmentFixed)
	return b.String()
}

const manEnvironmentFixed = `.TP
.B ETCDCTL_ENDPOINTS\fR, \fBETCDCTL_CACERT\fR, \fBETCDCTL_CERT\fR, \fBETCDCTL_KEY\fR, \fBETCDCTL_USER\fR, \fBETCDCTL_PASSWORD\fR, \fBETCDCTL_DIAL_TIMEOUT
read as etcdctl reads them, after the flags and the \fBCONCH_*\fP variables and before
\fI/etc/conch/conch.conf\fP. \fBETCDCTL_USER\fP may be \fIname\fP:\fIpassword\fP;
\fBETCDCTL_PASSWORD\fP is the password itself.
.PP
Only connection settings and the node's name (\fBCONCH_NODE\fP) are read from the
environment: \fB\-\-max\fP, \fB\-\-ttl\fP, \fB\-\-wait\fP and \fB\-\-spread\fP never are, so a
conch started inside a job does not inherit the outer job's semaphore.
.PP
The command gets:
.TP
.B CONCH_REV
the fencing token: the etcd create revision of this holder's key, in decimal; it grows
with every new holder.
.TP
.B CONCH_SEMA\fR, \fBCONCH_MAX
the semaphore's name and capacity.
.TP
.B CONCH_LEASE
the etcd lease the slot is bound to, in hexadecimal.
.PP
Read from systemd:
.TP
.B JOURNAL_STREAM
when it names conch's standard error, conch logs native journal entries with the fields
\fBCONCH_SEMA\fP, \fBCONCH_MAX\fP, \fBCONCH_REV\fP, \fBCONCH_STATE\fP (WAIT, HELD, RELEASED,
TIMEOUT, LOST), \fBCONCH_AHEAD\fP (waiters ahead, while waiting) and \fBCONCH_EXIT_STATUS\fP
(on release): \fBjournalctl CONCH_SEMA=\fP\fIname\fP lists one semaphore's history.
Elsewhere conch writes one line per transition, HELD and RELEASED only with \fB\-v\fP.
When it names conch's standard output or error, the command's output to it is relayed by
conch, so that \fBjournalctl \-u\fP \fIservice\fP shows it under the service (not the
command's scope), as the service's \fBSyslogIdentifier=\fP or the command's base name.
.TP
.B NOTIFY_SOCKET
conch sends \fBSTATUS=\fP on every transition (with the queue position while waiting, as
in "waiting for heavy\-jobs[max=2] (2/2 held), 3 ahead"), \fBREADY=1\fP once the command runs and
\fBSTOPPING=1\fP when it winds down; use \fBType=notify\fP with \fBNotifyAccess=main\fP.
The command does not inherit \fBNOTIFY_SOCKET\fP.
.TP
.B WATCHDOG_USEC\fR, \fBWATCHDOG_PID
with \fBWatchdogSec=\fP, conch pings the watchdog at half the interval while it waits
and holds. The command does not inherit them.
`

// manTail is FILES, EXAMPLES and SEE ALSO.
const manTail = `.SH FILES
.TP
.I /etc/conch/conch.conf
connection settings in an \fB[etcd]\fP section: \fBendpoints\fP, \fBcacert\fP, \fBcert\fP,
\fBkey\fP, \fBuser\fP, \fBpassword\-file\fP, \fBdial\-timeout\fP (the long option names).
Another section, a setting given twice or an empty \fBendpoints\fP is refused (exit 64,
naming \fIFILE\fP:\fILINE\fP). Another file with \fB\-\-config\fP or \fBCONCH_CONFIG\fP.
.TP
.I /usr/share/doc/conch/examples/
systemd units: a \fBType=notify\fP service that waits for a slot, a maintenance service
and timer that skip a run when the fleet's slots are taken, a template unit, and a
drop\-in that passes endpoints and TLS files through \fBEnvironmentFile=\fP; a rolling
reboot timer and service with the boot unit that releases the slot, and a timer run
once per period from any of several nodes.
.SH EXAMPLES
A lock around a mutating script:
.PP
.RS
.nf
conch sema certs\-renew \-\-max 1 \-\-nonblock \-\- ./renew.sh || echo "already running elsewhere"
.fi
.RE
.PP
At most two nodes run heavy tasks at once:
.PP
.RS
.nf
conch sema heavy\-jobs \-\-max 2 \-\- /usr/local/bin/run\-job.sh
.fi
.RE
.PP
Who holds and who waits:
.PP
.RS
.nf
conch sema heavy\-jobs \-\-max 2 \-\-who
.fi
.RE
.PP
Every semaphore, as one JSON document:
.PP
.RS
.nf
conch sema \-\-who \-\-json
.fi
.RE
.PP
The queue live, a block at each change, until Ctrl\-C:
.PP
.RS
.nf
conch sema heavy\-jobs \-\-who \-\-watch
.fi
.RE
.PP
Every semaphore's metrics for node_exporter's textfile collector:
.PP
.RS
.nf
conch sema \-\-who \-\-format prometheus \-\-textfile /var/lib/prometheus/node\-exporter/conch.prom
.fi
.RE
.PP
A job's irreversible last step runs only while its slot is still held:
.PP
.RS
.nf
conch sema deploy \-\-max 1 \-\- sh \-c './prepare.sh && conch sema \-\-held && ./switch\-traffic.sh'
.fi
.RE
.PP
A timer\-driven job that runs on every node, at most two at a time, where a skipped run
is not a failure:
.PP
.RS
.nf
[Service]
Type=oneshot
NotifyAccess=main
ExecStart=/usr/bin/conch sema node\-maintenance \-\-max 2 \-\-nonblock \-\-runtime\-max 50m \-\- /usr/local/sbin/node\-maintenance
SuccessExitStatus=75
TimeoutStartSec=55min
.fi
.RE
.PP
A run that finds both slots taken exits 75 at once and the unit stays successful;
\fBjournalctl CONCH_SEMA=node\-maintenance\fP shows every run's transitions. With
\fB\-\-wait\fP instead of \fB\-\-nonblock\fP, \fBsystemctl status\fP shows the queue
position while it waits (raise TimeoutStartSec= above the wait as well: a oneshot's start
covers the wait and the run). /usr/share/doc/conch/examples has the complete units.
.PP
A rolling reboot, one node at a time, each next one only once the previous one is back:
the slot stays taken after \fBsystemctl reboot\fP returns, across the reboot, until the
node's boot unit frees it, or for 30 minutes at most:
.PP
.RS
.nf
conch sema rolling\-reboot \-\-max 1 \-\-nonblock \-\-hold\-after 30m \-\- systemctl reboot
conch sema rolling\-reboot \-\-max 1 \-\-release        # at boot, once healthy
.fi
.RE
.PP
The same hourly timer on three nodes, one successful run per hour among them:
.PP
.RS
.nf
conch sema ha\-job \-\-max 1 \-\-once\-per 50m \-\-wait 20m \-\- /usr/local/sbin/ha\-job
.fi
.RE
.PP
A freeze: no new start anywhere until resumed (running jobs go on):
.PP
.RS
.nf
conch sema node\-maintenance \-\-max 2 \-\-pause \-\-reason "incident 4711"
conch sema node\-maintenance \-\-max 2 \-\-resume
.fi
.RE
.SH SEE ALSO
.BR flock (1),
.BR systemd\-run (1),
.BR journalctl (1),
.BR systemd.service (5),
.BR systemd.timer (5),
.BR sd_notify (3)
`
