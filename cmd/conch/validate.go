package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	"github.com/conch-project/conch/unitrun"
)

// job is a validated `conch sema` invocation: every value the run needs, decided once by
// Execute; nothing reads the flags after it.
type job struct {
	name    string
	max     int // 0 with --who and no --max
	conn    etcdconn.Settings
	path    string   // resolved command
	command []string // the child's argv, as given after "--"
	wait    time.Duration
	waitSet bool
	scope   scopeFlags  // --scope, -p, --slice (D8)
	spread  bool        // --spread: one slot per node (D11)
	node    string      // --node / CONCH_NODE, or with --spread the kernel hostname
	run     runValues   // what running a command needs beyond the semaphore's name
	who     whoValues   // what --who needs beyond the semaphore's name
	fleet   fleetValues // --hold-after, --once-per, --deadline (fleet.go)
	// changeMax: --change-max, a capacity other than the live one is run beside it (D17)
	changeMax bool
}

// whoValues are the values of --who (checkWho), decided at validation.
type whoValues struct {
	format   string // the listing's form: text, json (--json or --format json) or prometheus
	textfile string // --textfile: write the metrics to this file; "" for stdout
	watch    bool   // --watch: the listing again at each change
	quiet    bool   // -q: no "no holders" line, the status says it
}

// runValues are the values of running a command (checkRun), decided at validation.
type runValues struct {
	ttl       time.Duration // the lease's TTL asked for (--ttl, rounded up to whole seconds: D4)
	nonblock  bool          // --nonblock, or --wait 0: never wait
	conflict  int           // the status of "no slot" (-E, default 75)
	quiet     bool          // -q: no "no free slot" line, the status says it
	keepCreds bool          // --keep-credentials-env
	// config is the config file named by --config or CONCH_CONFIG, made absolute, for the
	// child's CONCH_CONFIG (D5b); "" when conch read the default
	config     string
	runtimeMax time.Duration // --runtime-max; 0: none
	// killAfter is --kill-after as given, 0 when unset: unitrun's plan decides the stop grace
	// from it and -p TimeoutStopSec= (its default when neither sets one, D7) and reports it
	killAfter time.Duration
}

// Execute validates the invocation (go-flags calls it after parsing) and
// sets c.run. Every check that can fail happens here, before any etcd call
// (D3: 64 means nothing was written; D4). A command that is not found or not
// executable is reported before queueing too (127/126): no point waiting
// for a slot to run nothing. Errors are usage errors (64).
func (c *semaCmd) Execute(args []string) error {
	if c.Quiet && c.Verbose {
		return usagef("-q/--quiet and -v/--verbose exclude each other")
	}
	j, err := c.parseJob(args)
	if err != nil {
		return err
	}
	if c.Held {
		if err := c.checkHeldFlags(); err != nil {
			return err
		}
		c.setRun(j, func() error { return c.held(j) })
		return nil
	}
	if handled, err := c.fleetExecute(&j); handled || err != nil { // --release, --pause... (fleet.go)
		return err
	}
	if c.Who {
		if err := c.checkWho(); err != nil {
			return err
		}
		j.who = c.whoJob()
		c.setRun(j, func() error { return c.who(j) })
		return nil
	}
	if err := c.checkRun(j); err != nil {
		return err
	}
	if j, err = c.runJob(j); err != nil {
		return err
	}
	path, err := unitrun.Resolve(c.command[0])
	if err != nil {
		c.setRun(j, func() error { return endf(err, "", "%v", err) }) // 127 or 126 (exitStatus)
		return nil
	}
	j.path = path
	c.setRun(j, func() error { return c.acquire(j) })
	return nil
}

// setRun sets what Execute decided to run for job j, and the one reporter of its lines (the
// line that says why it ended included): everything Execute refuses before is said bare.
func (c *semaCmd) setRun(j job, run func() error) {
	c.rep, c.run = c.reporter(j), run
}

// parseJob checks the one <name>, --max and the connection settings (D4, D9).
func (c *semaCmd) parseJob(args []string) (job, error) {
	if len(args) == 0 && !c.Who && !c.Held { // --who with no name lists every semaphore; --held reads CONCH_SEMA
		return job{}, usagef("missing <name>: conch sema <name> --max N -- <cmd...>")
	}
	if len(args) > 1 {
		if c.dashdash {
			return job{}, usagef("expected one <name>, got %d: %s", len(args), quoteAll(args))
		}
		return job{}, usagef("expected one <name>, got %d: %s; put the command after --, as in: conch sema %s --max N -- %s",
			len(args), quoteAll(args), args[0], strings.Join(args[1:], " "))
	}
	var j job
	if len(args) == 1 {
		j.name = args[0]
		if err := schema.ValidateName(j.name); err != nil {
			return j, usageError{err.Error()}
		}
	}
	if c.Max != "" {
		m, err := schema.ParseMax(c.Max.String())
		if err != nil {
			return j, usageError{"--max: " + err.Error()}
		}
		j.max = m
	}
	conn, err := resolveConn(c.Conn, c.getenv, cmp.Or(string(c.Config), defaultConfigPath), c.Config != "")
	var xe *exitError
	if errors.As(err, &xe) { // a line of its own, without a usage hint (configAccessError)
		return j, err
	}
	if err != nil {
		return j, usageError{err.Error()}
	}
	j.conn = conn
	if strings.Contains(c.Conn.User, ":") && c.getenv("CONCH_USER") != c.Conn.User { // from argv (D9)
		conn.Warnings = append(conn.Warnings, "--user NAME:PASSWORD puts the password on the command line, where ps shows it to every user of this host until conch starts: use --password-file FILE (or CONCH_PASSWORD_FILE, password-file in conch.conf)")
	}
	for _, w := range conn.Warnings { // before anything else, whatever runs next
		fmt.Fprintf(c.stderr, "conch: WARNING: %s\n", w)
	}
	if c.Verbose { // which cluster, and why that one
		fmt.Fprintf(c.stderr, "conch: using %s, dial timeout %v (from %s)\n", conn.Where(), conn.DialTimeout, conn.DialTimeoutFrom)
	}
	j.spread, j.changeMax = c.Spread, c.ChangeMax
	return j, nil
}

// checkWho refuses what --who cannot use.
func (c *semaCmd) checkWho() error {
	if c.dashdash {
		return usagef("--who takes no command")
	}
	for flag, set := range map[string]bool{"--wait": c.Wait.set, "--nonblock": c.Nonblock, "--spread": c.Spread,
		"--runtime-max": c.RuntimeMax.set, "-p": len(c.Property) > 0, "--slice": c.Slice != "", "--change-max": c.ChangeMax} {
		if set { // a flag that would change nothing must not pass unnoticed (D3, D8)
			return usagef("%s goes with running a command, not with --who", flag)
		}
	}
	return c.checkFormat()
}

// checkFormat refuses --format and --textfile combinations that say two
// things, or where nothing would use them.
func (c *semaCmd) checkFormat() error {
	switch {
	case c.JSON && c.Format != "" && c.Format != "json":
		return usagef("--json and --format %s exclude each other", c.Format)
	case c.Textfile != "" && c.Format != "prometheus":
		return usagef("--textfile goes with --format prometheus")
	case c.Watch && c.Format == "prometheus":
		return usagef("--watch and --format prometheus exclude each other: scrape or write the metrics periodically instead")
	}
	return nil
}

// whoJob is the values of --who, from the flags checkWho passed.
func (c *semaCmd) whoJob() whoValues {
	v := whoValues{format: cmp.Or(string(c.Format), "text"), textfile: string(c.Textfile), watch: c.Watch, quiet: c.Quiet}
	if c.JSON {
		v.format = "json"
	}
	return v
}

// checkRun checks the flags of running a command.
func (c *semaCmd) checkRun(j job) error {
	switch {
	case c.JSON:
		return usagef("--json goes with --who")
	case c.Format != "" || c.Textfile != "" || c.Watch:
		return usagef("--format, --textfile and --watch go with --who")
	case j.max == 0:
		return usagef("--max N is required: the capacity is part of the semaphore's name")
	case !c.dashdash || len(c.command) == 0:
		return usagef("missing command: conch sema %s --max %d -- <cmd...>", j.name, j.max)
	case strings.TrimSpace(c.command[0]) == "":
		return usagef("the command after -- is empty: conch sema %s --max %d -- <cmd...>", j.name, j.max)
	case c.Nonblock && c.Wait.set:
		return usagef("--nonblock and --wait exclude each other (--nonblock is --wait 0)")
	case c.Conflict < 0 || c.Conflict > 255:
		return usagef("-E/--conflict-exit-code must be 0..255")
	case c.KillAfter.set && c.KillAfter.d == 0:
		return usagef("--kill-after must be more than 0: it is the grace between the stop signal and SIGKILL")
	case c.TTL.d <= 0:
		return usagef("--ttl must be more than 0 (etcd leases are whole seconds: it is rounded up)")
	}
	return nil
}

// runJob completes j with the values of running a command, from the flags checkRun passed.
func (c *semaCmd) runJob(j job) (job, error) {
	var err error
	// the node is the key of --spread and the node that --hold-after keeps the slot for
	// (D11, D13): the hostname's default must then be a node name too
	if j.node, err = nodeName(c.Node, c.Spread || c.HoldAfter.set); err != nil {
		return j, err
	}
	j.wait, j.waitSet = c.Wait.d, c.Wait.set
	if j.scope, err = parseScopeFlags(string(c.Scope), c.Property, c.Slice); err != nil {
		return j, err
	}
	j.command = c.command
	j.run = runValues{
		ttl:        sema.RoundTTL(c.TTL.d), // D4: --ttl 0.1 is a 1 s lease
		nonblock:   c.Nonblock || (c.Wait.set && c.Wait.d == 0),
		conflict:   int(c.Conflict),
		quiet:      c.Quiet,
		keepCreds:  c.KeepCreds,
		config:     absPath(string(c.Config)),
		runtimeMax: c.RuntimeMax.d,
		killAfter:  c.KillAfter.d,
	}
	return j, nil
}

// nodeName returns this node's name (D11, D11a) for a command that uses it: given
// (--node / CONCH_NODE) if set, else with hostDefault (--spread, --hold-after, --release: the
// node is a key or must match a record) the kernel hostname, else "" (the record then names
// the hostname). One rule for both, schema.ValidateNode: a name --release --node could not
// take is refused here too. An empty --node is refused, not read as the hostname. Errors are
// usage errors (64), before any etcd call.
func nodeName(given onceText, hostDefault bool) (string, error) {
	switch {
	case given == "\x00":
		return "", usagef("--node (or CONCH_NODE) is empty: name this node, or leave it unset for the hostname")
	case given != "":
		if err := schema.ValidateNode(string(given)); err != nil {
			return "", usagef("--node: %v", err)
		}
		return string(given), nil
	case !hostDefault:
		return "", nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", usagef("cannot read the hostname (%v): name this node with --node NAME or CONCH_NODE", err)
	}
	if err := schema.ValidateNode(host); err != nil {
		return "", usagef("the hostname cannot name this node (%v): set --node NAME or CONCH_NODE", err)
	}
	return host, nil
}

// quoteAll is args quoted one by one and joined with spaces, as an operator would type them.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
