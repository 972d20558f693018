package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Where systemd listens. The system bus address may be overridden with
// DBUS_SYSTEM_BUS_ADDRESS, as godbus and sd-bus allow.
const (
	systemBusAddress     = "unix:path=/run/dbus/system_bus_socket"
	systemPrivateAddress = "unix:path=/run/systemd/private"
	systemdRunDir        = "/run/systemd/system" // exists iff systemd is the init system
)

// ManagerAddress is one way to reach a systemd manager: a bus (Hello needed) or the
// manager's private socket (no bus daemon, no Hello). It is plain data, so that a process
// can hand the addresses it found to another (the guardian, StopUnitAt).
type ManagerAddress struct {
	Addr  string `json:"addr"`            // a D-Bus address, e.g. "unix:path=/run/systemd/private"
	Hello bool   `json:"hello,omitempty"` // a bus: send Hello after authenticating
}

// ManagerAddresses returns where Connect looks for the manager, in its order, as this
// process's uid and environment say (managerAddresses). It cannot fail; the list is empty
// when no user manager can be found (not root, no XDG_RUNTIME_DIR nor session bus).
func ManagerAddresses() []ManagerAddress { return managerAddresses(os.Geteuid(), os.Getenv) }

// managerAddresses lists where to find the manager to talk to (D8): as root the system
// bus, then systemd's private socket; otherwise the user's own manager, like
// systemd-run --user: its private socket in $XDG_RUNTIME_DIR, then the user bus.
func managerAddresses(euid int, getenv func(string) string) []ManagerAddress {
	if euid == 0 {
		sys := getenv("DBUS_SYSTEM_BUS_ADDRESS")
		if sys == "" {
			sys = systemBusAddress
		}
		return []ManagerAddress{{sys, true}, {systemPrivateAddress, false}}
	}
	var out []ManagerAddress
	runtime := getenv("XDG_RUNTIME_DIR")
	if runtime != "" {
		out = append(out, ManagerAddress{"unix:path=" + runtime + "/systemd/private", false})
	}
	if session := getenv("DBUS_SESSION_BUS_ADDRESS"); session != "" {
		out = append(out, ManagerAddress{session, true})
	} else if runtime != "" {
		out = append(out, ManagerAddress{"unix:path=" + runtime + "/bus", true})
	}
	return out
}

// UserManager reports whether Connect talks to the user's own manager (not root) rather than
// the system's; pass it to ReadPlacement so both look at the same unit tree.
func UserManager() bool { return os.Geteuid() != 0 }

// Connect connects to the systemd manager scope mode uses (D8): the system manager over the
// system bus when running as root (falling back to its private socket), the user's own
// manager otherwise (its private socket in $XDG_RUNTIME_DIR, then the user bus). ctx bounds
// the connection set-up only: the connection stays usable after ctx ends, until the caller
// Closes it. go-systemd's connection subscribes to JobRemoved as it is made, and runs a
// goroutine dispatching signals until Close. It returns an error wrapping ErrBusUnavailable
// when no address answers.
func Connect(ctx context.Context) (*sdbus.Conn, error) {
	addrs := ManagerAddresses()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: not root, and neither XDG_RUNTIME_DIR nor DBUS_SESSION_BUS_ADDRESS is set", ErrBusUnavailable)
	}
	var errs []error
	for _, a := range addrs {
		conn, err := dialManager(ctx, a)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a.Addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %w", ErrBusUnavailable, errors.Join(errs...))
}

// dialManager opens go-systemd's pair of connections to a. godbus closes a connection when the
// context it was dialled with ends, so the connections get a context of their own that ctx
// cancels only while they are being set up.
func dialManager(ctx context.Context, a ManagerAddress) (*sdbus.Conn, error) {
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, cancel) // aborts a hung dial, auth or Hello
	conn, err := sdbus.NewConnection(func() (*dbus.Conn, error) { return dialAddress(connCtx, a) })
	if !detach() { // ctx ended during the set-up: cancel closed (or is closing) the connections
		if conn != nil {
			conn.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return conn, nil
}

// Booted reports whether systemd is the init system here (/run/systemd/system exists), as
// Dial checks first, without touching any bus.
func Booted() bool {
	_, err := os.Stat(systemdRunDir)
	return err == nil
}

// Available reports whether scope mode can be used here (D8, --scope=auto): nil when systemd is
// the init system (/run/systemd/system exists) and its manager answers on the bus Connect
// picks within ctx. Otherwise an error wrapping ErrNoSystemd or ErrBusUnavailable.
func Available(ctx context.Context) error {
	conn, err := Dial(ctx)
	if err != nil {
		return err
	}
	conn.Close()
	return nil
}

// Dial is Available that keeps the connection for the caller's scopes, so that checking for systemd
// and running the command in a scope cost one connection (D8): it returns a connection to the
// manager Connect picks once systemd is known to be the init system and its manager has
// answered a call within ctx. The caller must Close it. Errors wrap ErrNoSystemd (checked first,
// without touching any bus) or ErrBusUnavailable.
func Dial(ctx context.Context) (*sdbus.Conn, error) {
	if _, err := os.Stat(systemdRunDir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSystemd, err)
	}
	conn, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.SystemStateContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: the manager does not answer: %w", ErrBusUnavailable, err)
	}
	return conn, nil
}

// dialAddress opens one plain godbus connection to a: dial, EXTERNAL authentication as our
// uid, and Hello on a bus (not on systemd's private socket). ctx is the connection's own:
// godbus closes it when ctx ends.
func dialAddress(ctx context.Context, a ManagerAddress) (*dbus.Conn, error) {
	c, err := dbus.Dial(a.Addr, dbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		_ = c.Close()
		return nil, err
	}
	if a.Hello {
		if err := c.Hello(); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// dbusError maps the D-Bus errors scope mode meets to this package's sentinels, keeping the
// original in the chain; other errors are returned as they are.
func dbusError(err error) error {
	var name string
	var v dbus.Error
	var p *dbus.Error
	switch {
	case errors.As(err, &v):
		name = v.Name
	case errors.As(err, &p):
		name = p.Name
	default:
		return err
	}
	switch name {
	case "org.freedesktop.systemd1.UnitExists":
		return fmt.Errorf("%w: %w", ErrUnitExists, err)
	case "org.freedesktop.systemd1.NoSuchUnit":
		return fmt.Errorf("%w: %w", ErrNoSuchUnit, err)
	case "org.freedesktop.DBus.Error.AccessDenied", "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired":
		return fmt.Errorf("%w: %w", ErrAccessDenied, err)
	case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NoReply",
		"org.freedesktop.DBus.Error.Disconnected":
		return fmt.Errorf("%w: %w", ErrBusUnavailable, err)
	}
	return err
}
