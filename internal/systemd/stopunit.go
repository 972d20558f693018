package systemd

import (
	"context"
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// The guardian process's own D-Bus call to stop its scope when its caller died (D7).

// StopUnitAt asks the manager at the first of addrs that answers to stop unit (mode "replace")
// and returns once the stop job is enqueued, without waiting for it: the guardian uses it to
// stop its own scope when its caller died (D7), and systemd's stop signal then reaches the guardian
// too. A unit that is already gone is not an error. It uses one plain godbus connection (no
// signal subscription) and closes it; ctx bounds everything.
func StopUnitAt(ctx context.Context, addrs []ManagerAddress, unit string) error {
	var errs []error
	for _, a := range addrs {
		err := stopUnitOnce(ctx, a, unit)
		if err == nil || errors.Is(err, ErrNoSuchUnit) {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a.Addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("cannot stop %s: %w", unit, errors.Join(errs...))
}

// stopUnitOnce is StopUnitAt at one address.
func stopUnitOnce(ctx context.Context, a ManagerAddress, unit string) error {
	c, err := dialAddress(ctx, a)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	obj := c.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	var job dbus.ObjectPath
	err = obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.StopUnit", 0, unit, "replace").Store(&job)
	return dbusError(err)
}
