package main

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/unitrun"
	"github.com/jessevdk/go-flags"
)

// connOptions are the etcd connection settings (D9). Each is also read from
// CONCH_* (env tags here), then ETCDCTL_*, then /etc/conch/conch.conf, then
// the default: see resolveConn. They are the only settings read from the
// environment (D5).
type connOptions struct {
	Endpoints    endpointsValue `long:"endpoints" env:"CONCH_ENDPOINTS" value-name:"URLS" ini-name:"endpoints" default-mask:"127.0.0.1:2379" description:"etcd endpoints, comma-separated host:port or URLs"`
	CACert       string         `long:"cacert" env:"CONCH_CACERT" value-name:"FILE" ini-name:"cacert" default-mask:"-" description:"CA bundle to verify etcd's TLS certificate; with TLS files every endpoint must be https:// (or host:port): http:// is refused, never plaintext"`
	Cert         string         `long:"cert" env:"CONCH_CERT" value-name:"FILE" ini-name:"cert" default-mask:"-" description:"TLS client certificate"`
	Key          string         `long:"key" env:"CONCH_KEY" value-name:"FILE" ini-name:"key" default-mask:"-" description:"TLS client key"`
	User         string         `long:"user" env:"CONCH_USER" value-name:"NAME" ini-name:"user" default-mask:"-" description:"etcd user; the password comes from --password-file or ETCDCTL_PASSWORD (etcdctl's NAME:PASSWORD also works, but puts it on argv)"`
	PasswordFile string         `long:"password-file" env:"CONCH_PASSWORD_FILE" value-name:"FILE" ini-name:"password-file" default-mask:"-" description:"file holding the etcd password (first line)"`
	DialTimeout  dialTimeout    `long:"dial-timeout" env:"CONCH_DIAL_TIMEOUT" value-name:"D" ini-name:"dial-timeout" default-mask:"5s" description:"give up when no endpoint answers within D at start (exit 69)"`
}

// semaCmd is `conch sema` (04_sema.md "Synopsis"). The semaphore's own
// settings have no env tags: a conch started inside a job must not inherit
// the outer job's --max, --ttl, --wait or --spread (D5). --node is a setting
// of the node, not of the semaphore, hence CONCH_NODE (D11).
type semaCmd struct {
	Max        onceText  `long:"max" value-name:"N" description:"capacity: at most N holders cluster-wide, 1..10000 (required, except with --who, where it picks one capacity, and --held, which takes it from CONCH_MAX)"`
	TTL        duration  `long:"ttl" value-name:"D" default:"10s" description:"lease TTL; a crashed holder's slot frees after this (whole seconds, rounded up)"`
	Wait       duration  `long:"wait" value-name:"D" description:"give up after waiting D for a slot (exit 75); a slot free at once is taken however short D; default: wait forever"`
	Nonblock   bool      `short:"n" long:"nonblock" description:"do not wait: exit 75 at once when no slot is free (flock -n style; same as --wait 0)"`
	Conflict   decimal   `short:"E" long:"conflict-exit-code" value-name:"N" default:"75" description:"exit status when no slot was had (for commands whose own status may be 75)"`
	KillAfter  duration  `long:"kill-after" value-name:"D" description:"grace between the stop signal and SIGKILL when the child must stop"` // default: unitrun's (newParser)
	RuntimeMax duration  `long:"runtime-max" value-name:"D" description:"stop the child if it runs longer than D (exit 124); default (or 0): no limit"`
	Spread     bool      `long:"spread" description:"at most one slot per node: the key is named after the node (--node), so a second job on a node that holds or waits finds no slot (it waits for the node's key to go, or exits 75 with --nonblock)"`
	Node       onceText  `long:"node" env:"CONCH_NODE" value-name:"NAME" default-mask:"the kernel hostname" description:"this node's name: the key of --spread, the host in the holder record, and the node whose slots --hold-after keeps and --release frees; set it where nodes share one hostname, as containers may"`
	Who        bool      `long:"who" description:"list holders and waiters of the semaphore instead of running a command; with no <name>, of every semaphore"`
	JSON       bool      `long:"json" description:"with --who: print one JSON document"`
	Format     whoFormat `long:"format" value-name:"FORMAT" choice:"text" choice:"json" choice:"prometheus" default-mask:"text" description:"with --who: text, json (as --json) or prometheus (the Prometheus text format: per semaphore capacity, holders, waiters, held-after slots, paused, oldest holder and waiter ages)"`
	Watch      bool      `long:"watch" description:"with --who: after the listing, print it again at each change (a timestamped block; with --json one JSON document per line), until Ctrl-C, SIGTERM, SIGHUP or SIGQUIT; a signal ignored at start stays ignored, and a script's background job starts with SIGINT ignored: a script stops it with SIGTERM (kill PID)"`
	Textfile   filePath  `long:"textfile" value-name:"PATH" description:"with --who --format prometheus: write the metrics to PATH atomically (a temporary file in its folder, then rename), for node_exporter's textfile collector"`
	Held       bool      `long:"held" description:"inside a command run by conch: exit 0 if its slot is still held (one linearizable read), 70 with the reason if not; the slot comes from CONCH_SEMA, CONCH_MAX, CONCH_LEASE and CONCH_REV, as in: conch sema --held && STEP"`
	Quiet      bool      `short:"q" long:"quiet" description:"print only warnings and errors: no \"waiting for\" line, no \"no free slot\" line (its exit status stays 75, or -E N); for cron and timers; the journal and sd_notify get the same as without -q"`
	KeepCreds  bool      `long:"keep-credentials-env" description:"let the child inherit conch's credential variables (ETCDCTL_PASSWORD, CONCH_PASSWORD_FILE, the password in ETCDCTL_USER/CONCH_USER), which are removed by default"`
	Verbose    bool      `short:"v" long:"verbose" description:"log every transition (HELD, RELEASED, lease TTL granted)"`
	Scope      scopeMode `long:"scope" value-name:"MODE" choice:"auto" choice:"always" choice:"never" default:"auto" description:"where the child runs: auto = in a transient systemd scope when systemd is PID 1 and its bus answers, else directly; always = in a scope (exit 69 without systemd); never = directly, under conch's own supervision"`
	Property   []string  `short:"p" long:"property" value-name:"NAME=VALUE" description:"set a property on the child's scope, as systemd-run -p (e.g. MemoryMax=1G, CPUQuota=50%, KillSignal=SIGINT, RuntimeMaxSec=1h); implies --scope=always"`
	Slice      string    `long:"slice" value-name:"SLICE" description:"put the child's scope in SLICE; implies --scope=always"`
	Config     confPath  `long:"config" value-name:"FILE" env:"CONCH_CONFIG" default-mask:"/etc/conch/conch.conf" description:"INI file with an [etcd] section for the connection settings (the default is read if it exists; a file named here must exist)"`

	// Fleet jobs: rolling reboots, HA timers, freezes, windows (fleet*.go).
	HoldAfter   duration `long:"hold-after" value-name:"D" description:"keep the slot taken for D after the command ends (however it ends, unless the slot was lost), with no process left: the slot survives conch's exit, a reboot and a power loss, and frees after D or at --release (rolling reboots)"`
	Release     bool     `long:"release" description:"free the slots this node (--node) holds after a run (--hold-after), at once, and exit 0, whether it freed one or none: for a boot unit; never touches a running command's slot nor another node's"`
	Pause       bool     `long:"pause" description:"stop every new start of the semaphore, cluster-wide, until --resume: running commands go on, waiters keep their places and wait, --nonblock exits 75 naming the pause; exit 0 (also when already paused)"`
	Reason      string   `long:"reason" value-name:"TEXT" description:"with --pause: why, shown to waiters, --nonblock and --who; at most 1024 bytes"`
	ChangeMax   bool     `long:"change-max" description:"allow a --max other than the one live for <name>: run, --pause, --resume or --release under a separate semaphore beside the live one, with a warning (to change the capacity deliberately while the old one drains); without it such a --max is refused (exit 64)"`
	ResetPeriod bool     `long:"reset-period" description:"open this period of --once-per again: delete the marker of the last successful run, so the next run runs; exit 0 (also when the period was open)"`
	Resume      bool     `long:"resume" description:"undo --pause: waiters start again in queue order; exit 0 (also when not paused)"`
	Deadline    onceText `long:"deadline" value-name:"TIME" description:"give up waiting at TIME, RFC 3339 or HH:MM[:SS] (the next such local time), exit 75; however long the wait so far; RFC 3339 as 2026-12-24T06:00:00+01:00; excludes --wait and --nonblock (maintenance windows)"`
	OncePer     duration `long:"once-per" value-name:"D" description:"at most one successful run per period D across the cluster (needs --max 1): a run that finds this period's run done is skipped (exit 0, saying which node ran it and when the next may start); a failed run leaves the period open, so the next one, here or elsewhere, tries again (HA timers)"`

	Conn connOptions `group:"etcd connection"`

	// command is everything after "--", untouched (the child's argv is its own).
	command  []string
	dashdash bool
	stdout   io.Writer
	stderr   io.Writer
	getenv   func(string) string
	// run is what Execute decided to do; it returns the error the run
	// ended with (nil: exit 0; see exitStatus).
	run func() error
	// rep reports on the semaphore, set with run (setRun); nil before.
	rep *reporter
}

// scopeMode is --scope's value (D8); go-flags checks it against the choice
// tags, and completes it (Complete) for the shells.
type scopeMode string

// scopeModes are --scope's values, as its choice tags list them.
var scopeModes = []string{"auto", "always", "never"}

// Complete implements flags.Completer: the modes starting with match
// (without it bash completion offers nothing for --scope).
func (scopeMode) Complete(match string) []flags.Completion {
	var out []flags.Completion
	for _, m := range scopeModes {
		if strings.HasPrefix(m, match) {
			out = append(out, flags.Completion{Item: m})
		}
	}
	return out
}

// endpointsValue is --endpoints: a flag (or CONCH_ENDPOINTS) given empty is
// refused, not taken for the default: an empty list is a mistake.
type endpointsValue string

// UnmarshalFlag implements flags.Unmarshaler.
func (e *endpointsValue) UnmarshalFlag(s string) error {
	if strings.TrimSpace(s) == "" {
		if v, ok := os.LookupEnv("CONCH_ENDPOINTS"); ok && strings.TrimSpace(v) == "" {
			return errors.New("CONCH_ENDPOINTS is set but empty: name at least one endpoint, or unset it for the default " + etcdconn.DefaultEndpoint)
		}
		return errors.New("empty: name at least one endpoint (host:port or URL), or leave --endpoints out for the default " + etcdconn.DefaultEndpoint)
	}
	*e = endpointsValue(s)
	return nil
}

// dialTimeout is --dial-timeout: a flag (or CONCH_DIAL_TIMEOUT) given empty is refused, not
// taken for the default, as endpointsValue.
type dialTimeout string

// UnmarshalFlag implements flags.Unmarshaler.
func (d *dialTimeout) UnmarshalFlag(s string) error {
	if strings.TrimSpace(s) == "" {
		if v, ok := os.LookupEnv("CONCH_DIAL_TIMEOUT"); ok && strings.TrimSpace(v) == "" {
			return errors.New("CONCH_DIAL_TIMEOUT is set but empty: give a duration (5s), or unset it for the default " + etcdconn.DefaultDialTimeout.String())
		}
		return errors.New("empty: give a duration (5s), or leave --dial-timeout out for the default " + etcdconn.DefaultDialTimeout.String())
	}
	*d = dialTimeout(s)
	return nil
}

// plainFlagError rewrites go-flags' "invalid argument for flag `--ttl'
// (expected main.duration): ..." without the Go type name, which tells an operator nothing; other
// errors are returned as they are.
func plainFlagError(err error) error {
	if cerr, ok := choiceError(err); ok { // flagstyle.go
		return cerr
	}
	var ferr *flags.Error
	if !errors.As(err, &ferr) || ferr.Type != flags.ErrMarshal {
		return err
	}
	msg := ferr.Message
	if i := strings.Index(msg, " (expected "); i >= 0 {
		if j := strings.Index(msg[i:], "):"); j >= 0 {
			msg = msg[:i] + msg[i+j+1:]
		}
	}
	msg = strings.Replace(msg, "invalid argument for flag", "invalid value for", 1)
	if strings.Contains(msg, "strconv.") {
		msg = msg[:strings.Index(msg, ":")] + ": not an integer"
	}
	return errors.New(msg)
}

type globalOptions struct {
	Version bool `long:"version" description:"print the version and exit"`
	// ManPage is for packaging (make man), hence hidden from help and completion.
	ManPage bool `long:"man-page" hidden:"true" description:"write the conch(1) man page (roff) to stdout"`
}

const semaLong = `Run a command while holding one of N slots of a cluster-wide counting semaphore kept in etcd. At most N processes with the same <name> and --max, on any node, run at once; --max 1 is a lock.

conch enqueues a key bound to its lease under /conch/v1/sema/<name>/<max>/, waits its turn (waking only when a slot can be its own: no thundering herd), runs the command with CONCH_REV (the fencing token), CONCH_SEMA, CONCH_MAX and CONCH_LEASE in its environment, and releases the slot when it ends. If the slot is lost while the command runs, the command is stopped (its stop signal, then SIGKILL after --kill-after) and conch exits 70. A crashed holder's slot frees at lease expiry (--ttl).

The capacity is part of the name, and a name has one live capacity: a run, --pause, --resume or --release with another --max than the live one is refused (exit 64) unless --change-max says the change is deliberate (a separate semaphore beside the old one, warned); --who shows every capacity.`

// semaSynopsis is the synopsis of `conch sema --help` (writeSemaHelp) and of README (as
// TestHelpSynopsisMatchesReadme checks); the examples are the man page's (man/tail.roff).
var semaSynopsis = `Synopsis:
  conch sema <name> --max N [--ttl 10s] [--wait D | --nonblock] [-E N]
             [--kill-after ` + unitrun.DefaultKillAfter.String() + `] [--runtime-max D] [--spread [--node NAME]] -- <cmd...>
  conch sema <name> --max N [--hold-after D] [--once-per D] [--deadline TIME]
             [OPTIONS] -- <cmd...>
  conch sema <name> --max N --release [--node NAME]
  conch sema <name> --max N --pause [--reason TEXT] | --resume
  conch sema <name> [--max N] --who [--json]
  conch sema [<name>] [--max N] --who --format prometheus [--textfile PATH]
  conch sema [<name>] [--max N] --who --watch [--json]
  conch sema --who [--max N] [--json]      (every semaphore)
  conch sema [<name> --max N] --held       (inside a command run by conch)
`

// Usage implements go-flags' Usage interface: the command's synopsis line.
func (c *semaCmd) Usage() string {
	return "<name> --max N [OPTIONS] -- <cmd...>"
}

// newParser builds the go-flags parser, fresh for each call (no state shared between tests).
func newParser(g *globalOptions, s *semaCmd) *flags.Parser {
	p := flags.NewNamedParser("conch", flags.HelpFlag|flags.PassDoubleDash)
	p.ShortDescription = "cluster-wide counting semaphore on etcd, with systemd supervision"
	p.LongDescription = "conch runs commands under cluster-wide limits kept in etcd. See `conch sema --help`."
	if _, err := p.AddGroup("Global options", "", g); err != nil {
		panic(err)
	}
	c, err := p.AddCommand("sema", "run a command while holding one of N cluster-wide slots", semaLong, s)
	if err != nil {
		panic(err)
	}
	c.ArgsRequired = false
	if _, err := p.AddCommand("fleetlock", "serve FleetLock (Fedora CoreOS, Flatcar reboots) with groups that are conch semaphores", fleetlockLong, &fleetlockCmd{s: s}); err != nil {
		panic(err)
	}
	// --kill-after's default is unitrun's, which decides the child's stop timing: shown here,
	// applied there (an unset --kill-after reaches unitrun as 0)
	c.FindOptionByLongName("kill-after").DefaultMask = unitrun.DefaultKillAfter.String()
	return p
}
