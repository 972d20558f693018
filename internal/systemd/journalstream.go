package systemd

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"
)

// journald's stdout streams (systemd-journald.service(8), "Stream logging"). A process that
// connects to JournalStreamSocket writes a header of seven lines, then its log text. journald
// attributes every chunk it reads to the process that wrote it (SCM_CREDENTIALS on each
// read) and takes _SYSTEMD_UNIT from that process's cgroup, whoever connected the stream.
// So a command in conch's scope that writes to any journal stream is logged as the scope,
// while the same bytes written by conch, which stays in its service, are logged as the
// service (JournalRelay).
const (
	// JournalStreamSocket is where journald accepts stdout streams, for system and user
	// services alike.
	JournalStreamSocket = "/run/systemd/journal/stdout"

	// DefaultStreamPriority is systemd's default SyslogFacility=daemon, SyslogLevel=info
	// (LOG_DAEMON|LOG_INFO), the priority of a line without a "<N>" prefix.
	DefaultStreamPriority = 3<<3 | 6

	// streamSetupLineMax is the longest header line journald takes (a unit name's 255
	// characters, less one): a longer one ends the stream.
	streamSetupLineMax = 254
	// streamSendBuffer is the socket send buffer asked for, as systemd asks for its services'
	// streams (8 MiB), so that a burst of output does not block the writer while journald
	// is busy. The kernel caps it at net.core.wmem_max.
	streamSendBuffer = 8 << 20
)

// StreamHeader is the set-up of one journald stdout stream, as systemd writes it for a
// service whose StandardOutput= is the journal.
type StreamHeader struct {
	// Identifier becomes SYSLOG_IDENTIFIER of every line (`journalctl -t`); "" leaves it unset.
	Identifier string
	// Unit names the unit the stream belongs to. journald uses it only when the writer is
	// root and its cgroup cannot be read any more (it has exited), as _SYSTEMD_UNIT.
	Unit string
	// Priority is the syslog priority (facility<<3 | level) of lines without a "<N>" prefix,
	// e.g. DefaultStreamPriority.
	Priority int
	// LevelPrefix makes journald read a leading "<N>" as the line's level (sd-daemon(3)).
	LevelPrefix bool
	// ToKmsg and ToConsole also copy each line to the kernel log and the console, as
	// StandardOutput=kmsg and journal+console do.
	ToKmsg, ToConsole bool
}

// encode returns the header's seven lines. Values journald would refuse (a line break, a
// control character, a line longer than it reads during set-up) are cleaned up, so that the
// stream is never ended by its header: control characters become "_", the identifier is cut
// to fit, a unit name that does not fit is left out.
func (h StreamHeader) encode() []byte {
	ident := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '_'
		}
		return r
	}, h.Identifier)
	if len(ident) > streamSetupLineMax {
		ident = strings.ToValidUTF8(ident[:streamSetupLineMax], "")
	}
	unit := h.Unit
	if len(unit) > streamSetupLineMax || strings.IndexFunc(unit, unicode.IsControl) >= 0 {
		unit = ""
	}
	return fmt.Appendf(nil, "%s\n%s\n%d\n%d\n0\n%d\n%d\n", ident, unit, h.Priority,
		b2i(h.LevelPrefix), b2i(h.ToKmsg), b2i(h.ToConsole))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DialJournalStream connects a new stdout stream to journald at socket (normally
// JournalStreamSocket) and sends h. Every line written to the returned connection is then
// logged as h says, attributed to the process that writes it. It does not read from the
// connection (journald never writes); the caller must Close it, or CloseJournalStream it to
// have its lines logged before the caller's next entry. ctx bounds the connect. Errors name
// the socket: journald is not running, or the socket refuses the connection.
func DialJournalStream(ctx context.Context, socket string, h StreamHeader) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to journald at %s: %w", socket, err)
	}
	conn := c.(*net.UnixConn)
	_ = conn.CloseRead() // as systemd does: the stream is one way
	_ = conn.SetWriteBuffer(streamSendBuffer)
	if _, err := conn.Write(h.encode()); err != nil {
		conn.Close()
		return nil, fmt.Errorf("cannot set up a journal stream at %s: %w", socket, err)
	}
	return conn, nil
}

// CloseJournalStream waits, up to wait, until journald has read all that was written to conn
// (a stream of DialJournalStream's), then closes it. journald reads a stream and logs the
// complete lines it read in one step of its single event loop, so an entry logged after this
// returns (natively, or on another stream) is stored after every complete line written before
// it. The wait polls the bytes journald has not read yet (SIOCOUTQ: a unix socket's sent data
// stays charged to the sender until the receiver reads it). Past wait it closes anyway; the
// lines are not lost, only their order against later entries is not ensured.
func CloseJournalStream(conn *net.UnixConn, wait time.Duration) {
	defer conn.Close()
	raw, err := conn.SyscallConn()
	if err != nil {
		return
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		unread := 0
		cerr := raw.Control(func(fd uintptr) { unread, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		if cerr != nil || err != nil || unread == 0 {
			return
		}
		time.Sleep(streamReadPoll)
	}
}

// streamReadPoll is how often CloseJournalStream looks whether journald has read a stream:
// journald reads within milliseconds, so a few polls at most.
const streamReadPoll = 2 * time.Millisecond

// ServiceStreamHeader reads over conn the logging settings of service (SyslogIdentifier=,
// SyslogFacility= and SyslogLevel=, SyslogLevelPrefix=, and StandardOutput= or, with stderr,
// StandardError=) and returns the header systemd gives that service's own stream. When the
// service sets no SyslogIdentifier=, the identifier is fallback (systemd would use its
// program's name). ctx bounds the call; errors name the service and wrap ErrNoSuchUnit,
// ErrAccessDenied or ErrBusUnavailable.
func ServiceStreamHeader(ctx context.Context, conn *sdbus.Conn, service string, stderr bool, fallback string) (StreamHeader, error) {
	all, err := conn.GetUnitTypePropertiesContext(ctx, service, "Service")
	if err != nil {
		return StreamHeader{}, fmt.Errorf("cannot read the log settings of %s: %w", service, dbusError(err))
	}
	return serviceHeader(all, service, stderr, fallback), nil
}

// serviceHeader builds ServiceStreamHeader's result from a service's D-Bus properties;
// missing or mistyped ones take systemd's defaults.
func serviceHeader(all map[string]any, service string, stderr bool, fallback string) StreamHeader {
	h := StreamHeader{Identifier: fallback, Unit: service, Priority: DefaultStreamPriority, LevelPrefix: true}
	if id, _ := all["SyslogIdentifier"].(string); id != "" {
		h.Identifier = id
	}
	if prio, ok := all["SyslogPriority"].(int32); ok && prio >= 0 {
		h.Priority = int(prio)
	}
	if prefix, ok := all["SyslogLevelPrefix"].(bool); ok {
		h.LevelPrefix = prefix
	}
	output, _ := all["StandardOutput"].(string)
	if errOut, _ := all["StandardError"].(string); stderr && errOut != "inherit" && errOut != "" {
		output = errOut
	}
	h.ToKmsg = strings.HasPrefix(output, "kmsg")
	h.ToConsole = strings.HasSuffix(output, "+console")
	return h
}

// CommandIdentifier is the identifier systemd would give a service whose program is path:
// its base name ("/usr/local/bin/batch-worker" gives "batch-worker").
func CommandIdentifier(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}

// CallerStreamHeader returns a header function for a JournalRelay that carries the output of
// the command at path (stdout, or with stderr its stderr) as the calling process's own: when
// the caller runs in a service, that service's logging settings (ServiceStreamHeader, over a
// connection of its own that ctx bounds), with the command's identifier (CommandIdentifier)
// unless the service sets SyslogIdentifier=; else, or when the service cannot be read,
// systemd's defaults with that identifier. It never fails: what cannot be read is left at
// the defaults.
func CallerStreamHeader(path string, stderr bool) func(context.Context) StreamHeader {
	return func(ctx context.Context) StreamHeader {
		h := StreamHeader{Identifier: CommandIdentifier(path), Priority: DefaultStreamPriority, LevelPrefix: true}
		place, err := ReadPlacement(0, UserManager())
		if err != nil {
			return h
		}
		h.Unit = place.Unit
		svc, err := place.Service()
		if err != nil {
			return h
		}
		conn, err := Dial(ctx)
		if err != nil {
			return h
		}
		defer conn.Close()
		if sh, err := ServiceStreamHeader(ctx, conn, svc, stderr, h.Identifier); err == nil {
			return sh
		}
		return h
	}
}
