package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/fleetlock"
	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/sema/schema"
	"github.com/coreos/go-systemd/v22/journal"
)

// fleetlockCmd is `conch fleetlock`: a FleetLock server whose groups are conch semaphores
// (D19). Its settings have no env tags but the connection's (D5).
type fleetlockCmd struct {
	Listen   string      `long:"listen" value-name:"HOST:PORT" description:"serve FleetLock on this address (required), e.g. :8080 or 192.0.2.10:8080"`
	Group    []string    `long:"group" value-name:"NAME=N" description:"serve FleetLock group NAME as the semaphore NAME --max N: reboots and conch sema jobs of that name share one queue and its N slots (repeatable; default: default=1)"`
	Hold     duration    `long:"hold" value-name:"D" default:"1h" description:"a granted reboot slot frees after D if its node never reports back (steady-state), or at conch sema NAME --max N --release --node ID"`
	Queue    duration    `long:"queue" value-name:"D" description:"first come, first served across polling clients: a refused node keeps its place for D after its last request, and a freed slot is kept for the head of that queue (off by default)"`
	TLSCert  string      `long:"tls-cert" value-name:"FILE" description:"serve HTTPS only (TLS 1.2 or later) with this certificate (needs --tls-key)"`
	TLSKey   string      `long:"tls-key" value-name:"FILE" description:"the key of --tls-cert"`
	ClientCA string      `long:"client-ca" value-name:"FILE" description:"with --tls-cert: require client certificates signed by a CA of FILE"`
	Quiet    bool        `short:"q" long:"quiet" description:"print only warnings and errors: no line per grant and release (the journal gets them all the same)"`
	Verbose  bool        `short:"v" long:"verbose" description:"say which etcd is used, and why"`
	Config   confPath    `long:"config" value-name:"FILE" env:"CONCH_CONFIG" default-mask:"/etc/conch/conch.conf" description:"INI file with an [etcd] section for the connection settings (the default is read if it exists; a file named here must exist)"`
	Conn     connOptions `group:"etcd connection"`

	s *semaCmd // the CLI's state: stdout, stderr, getenv; run and rep are set here
}

const fleetlockLong = `Serve the FleetLock protocol (Fedora CoreOS's zincati, Flatcar's update agent) with each group a conch semaphore: a node's pre-reboot takes a slot of the semaphore NAME --max N, kept for --hold with no process behind it, and its steady-state frees it. Reboots and conch sema jobs of one name share one queue; --who shows a reboot slot as HELD via=fleetlock, and conch sema NAME --max N --release --node ID frees it from any node.

Node ids must be conch node names ([A-Za-z0-9][A-Za-z0-9._-]{0,127}, not 16 lower-case hex digits); zincati's 32 hex digits are. State lives only in etcd: several servers may serve one fleet.`

// fleetlockEpilog follows the generated help verbatim.
var fleetlockEpilog = `Synopsis:
  conch fleetlock --listen HOST:PORT [--group NAME=N]... [--hold 1h] [--queue D]
                  [--tls-cert FILE --tls-key FILE [--client-ca FILE]]
                  [etcd connection options] [-q | -v]

Exit status:
  killed by signal n  SIGTERM, SIGINT, SIGHUP or SIGQUIT: it stopped accepting,
                  let the requests in flight end, and re-raised the signal
  64              bad flags, groups or TLS files
  69              etcd unreachable at start, or the address cannot be listened
                  on (in use); once serving, an etcd outage is a 503 per request

Node side:
  # Fedora CoreOS, /etc/zincati/config.d/55-updates-strategy.toml
  [updates]
  strategy = "fleet_lock"
  [updates.fleet_lock]
  base_url = "http://192.0.2.10:8080/"

  # who holds a reboot slot, and freeing one by hand
  conch sema default --max 1 --who
  conch sema default --max 1 --release --node 0b6e4cfc2a7d4e0f9a1f3b5c7d9e1f20
`

// Usage implements go-flags' Usage interface.
func (f *fleetlockCmd) Usage() string { return "--listen HOST:PORT [--group NAME=N]... [OPTIONS]" }

// fleetlockJob is what Execute decided, for serve.
type fleetlockJob struct {
	listen string
	groups map[string]int
	hold   time.Duration
	queue  time.Duration
	conn   etcdconn.Settings
}

// Execute validates the invocation (go-flags calls it after parsing) and sets what runs.
// Every check that can fail happens here, before etcd or the network (64).
func (f *fleetlockCmd) Execute(args []string) error {
	if len(args) > 0 {
		return usagef("conch fleetlock takes no arguments, got %q", args)
	}
	if f.Quiet && f.Verbose {
		return usagef("-q/--quiet and -v/--verbose exclude each other")
	}
	if f.Listen == "" {
		return usagef("missing --listen HOST:PORT: the address to serve FleetLock on")
	}
	if _, _, err := net.SplitHostPort(f.Listen); err != nil {
		return usagef("--listen %q: %v", f.Listen, err)
	}
	groups, err := parseGroups(f.Group)
	if err != nil {
		return err
	}
	if f.Hold.d < time.Second {
		return usagef("--hold %v: must be at least 1s", f.Hold.d)
	}
	if f.Queue.set && f.Queue.d < time.Second {
		return usagef("--queue %v: must be at least 1s (longer than two of the clients' poll intervals)", f.Queue.d)
	}
	j := fleetlockJob{listen: f.Listen, groups: groups, hold: f.Hold.d, queue: f.Queue.d}
	if err := f.checkTLS(); err != nil {
		return err
	}
	conn, err := resolveConn(f.Conn, f.s.getenv, cmp.Or(string(f.Config), defaultConfigPath), f.Config != "")
	var xe *exitError
	if errors.As(err, &xe) {
		return err
	}
	if err != nil {
		return usageError{err.Error()}
	}
	for _, w := range conn.Warnings {
		fmt.Fprintf(f.s.stderr, "conch: WARNING: %s\n", w)
	}
	if f.Verbose {
		fmt.Fprintf(f.s.stderr, "conch: using %s, dial timeout %v (from %s)\n", conn.Where(), conn.DialTimeout, conn.DialTimeoutFrom)
	}
	j.conn = conn
	rep := newReporter(f.s.stderr, f.s.getenv, f.Verbose, "", 0)
	rep.bare, rep.warnOnly = true, f.Quiet
	f.s.rep, f.s.run = rep, func() error { return f.serve(j, rep) }
	return nil
}

// parseGroups reads --group NAME=N values (D19): default=1 when none; a bad spec or a name
// given twice is a usage error.
func parseGroups(specs []string) (map[string]int, error) {
	if len(specs) == 0 {
		return map[string]int{"default": 1}, nil
	}
	out := map[string]int{}
	for _, spec := range specs {
		name, n, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, usagef("--group %q: expected NAME=N, as in --group default=1", spec)
		}
		if err := fleetlock.ValidGroup(name); err != nil {
			return nil, usagef("--group: %v", err)
		}
		max, err := schema.ParseMax(n)
		if err != nil {
			return nil, usagef("--group %s: %v", name, err)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("--group %s given twice: a group is one semaphore", name)
		}
		out[name] = max
	}
	return out, nil
}

// checkTLS refuses TLS flags that do not go together, and files that cannot be used.
func (f *fleetlockCmd) checkTLS() error {
	switch {
	case f.TLSCert == "" && f.TLSKey == "" && f.ClientCA == "":
		return nil
	case f.TLSCert == "" || f.TLSKey == "":
		return usagef("--tls-cert and --tls-key go together")
	}
	if _, err := fleetlock.TLSConfig(f.TLSCert, f.TLSKey, f.ClientCA); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// serve runs the server until SIGTERM, SIGINT, SIGHUP or SIGQUIT, then stops accepting,
// lets the requests in flight end (bounded) and re-raises the signal (D3). 69 when etcd
// does not answer at start or the address cannot be listened on; once serving, an etcd
// outage is a 503 per request, never an exit.
func (f *fleetlockCmd) serve(j fleetlockJob, rep *reporter) error {
	ctx, stop := signalContext()
	defer stop()
	client, err := etcdconn.New(ctx, j.conn)
	if err != nil {
		return fmt.Errorf("fleetlock: %w", err) // 69 if etcd did not answer, else 64 (exitStatus)
	}
	defer client.Close()
	var tlsConf *tls.Config
	if f.TLSCert != "" {
		if tlsConf, err = fleetlock.TLSConfig(f.TLSCert, f.TLSKey, f.ClientCA); err != nil {
			return usagef("%v", err)
		}
	}
	ev := &fleetEvents{getenv: f.s.getenv, stderr: f.s.stderr, quiet: f.Quiet, notify: systemd.NotifierFor(f.s.getenv), kick: make(chan struct{}, 1)}
	srv, err := fleetlock.New(fleetlock.Config{Client: client, Groups: j.groups, Hold: j.hold, Queue: j.queue,
		Record: schema.Record{PID: os.Getpid()}, OnEvent: ev.event})
	if err != nil {
		return usagef("%v", err)
	}
	pctx, pcancel := context.WithTimeout(ctx, j.conn.DialTimeout)
	err = srv.Ping(pctx)
	pcancel()
	if err != nil {
		return endf(errUnavailable, "", "fleetlock: %s: %v", j.conn.Where(), err)
	}
	ln, err := net.Listen("tcp", j.listen)
	if err != nil {
		why := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			why = " (address in use: another process listens there)"
		}
		return endf(errUnavailable, "", "fleetlock: cannot listen on %s%s: %v", j.listen, why, err)
	}
	ev.srv = srv
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	ev.where = scheme + "://" + ln.Addr().String()
	rep.line("", false, "serving FleetLock on %s: %s; a slot is held at most %v", ev.where, groupsText(srv), j.hold)
	ev.status(ctx, "READY=1\n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // ends with ctx, joined before the stop is said
		defer wg.Done()
		ev.statusLoop(ctx)
	}()
	err = srv.Serve(ctx, ln, tlsConf)
	wg.Wait()
	ev.notifyRaw("STOPPING=1")
	if err != nil {
		return endf(errUnavailable, "", "fleetlock: serving on %s failed: %v", j.listen, err)
	}
	var sig errSignal
	if errors.As(context.Cause(ctx), &sig) {
		return signalExit(sig.sig, "", "fleetlock: stopped on %s", strings.ToUpper(sig.Error()[len("received "):]))
	}
	return nil
}

func groupsText(srv *fleetlock.Server) string {
	var parts []string
	for _, g := range srv.Groups() {
		parts = append(parts, fmt.Sprintf("%s[max=%d]", g, srv.Capacity(g)))
	}
	return "groups " + strings.Join(parts, ", ")
}

// fleetEvents tells of each grant and release (a journal entry with the id, or a line on
// stderr) and keeps the service manager's STATUS= line (groups and slots held).
type fleetEvents struct {
	mu     sync.Mutex
	getenv func(string) string
	stderr io.Writer
	quiet  bool
	notify systemd.NotifyFunc
	srv    *fleetlock.Server
	where  string
	kick   chan struct{} // an event happened: refresh STATUS= (buffered, 1)
}

// event is fleetlock's OnEvent: one line per grant or release, naming the id.
func (e *fleetEvents) event(ev fleetlock.Event) {
	e.mu.Lock()
	r := newReporter(e.stderr, e.getenv, false, ev.Group, ev.Max)
	r.warnOnly = e.quiet
	fields := map[string]string{"CONCH_NODE": ev.ID, "CONCH_VIA": schema.ViaFleetLock, "CONCH_REV": fmt.Sprint(ev.Slot.Rev)}
	if ev.Granted {
		r.emit(stateHeld, journal.PriNotice, false, fields, fmt.Sprintf("reboot slot granted to %s until %s (rev %d)",
			ev.ID, ev.Slot.Until.UTC().Format(time.RFC3339), ev.Slot.Rev))
	} else {
		r.emit(stateReleased, journal.PriNotice, false, fields, fmt.Sprintf("reboot slot of %s released (rev %d)", ev.ID, ev.Slot.Rev))
	}
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// statusInterval is how often STATUS= is refreshed without an event of this server: slots
// also free by expiry, other servers and conch sema jobs.
const statusInterval = 30 * time.Second

// statusLoop refreshes STATUS= after each event and every statusInterval, until ctx ends.
func (e *fleetEvents) statusLoop(ctx context.Context) {
	if e.notify == nil {
		return
	}
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.kick:
		}
		e.status(ctx, "")
	}
}

// status sends extra (READY=1 at start) with a STATUS= line naming the groups and the
// slots held, read from etcd within 2 s (without the counts when it does not answer).
func (e *fleetEvents) status(ctx context.Context, extra string) {
	if e.notify == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var parts []string
	states, err := e.srv.Slots(rctx)
	for _, g := range states {
		parts = append(parts, fmt.Sprintf("%s %d/%d held", g.Group, g.Held(), g.Max))
	}
	text := strings.Join(parts, ", ")
	if err != nil {
		text = groupsText(e.srv) + " (etcd not answering)"
	}
	e.notifyRaw(extra + "STATUS=serving FleetLock on " + e.where + ": " + text)
}

func (e *fleetEvents) notifyRaw(state string) {
	if e.notify != nil {
		e.notify(systemd.NotifyEscape(state))
	}
}
