package unitrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// This file runs in the guardian process: its own D-Bus call to stop its scope when conch
// died (D7).

// stopUnitAt asks the manager at the first of addrs that answers to stop unit (mode "replace")
// and returns once the stop job is enqueued, without waiting for it: the guardian uses it to
// stop its own scope when conch died (D7), and systemd's stop signal then reaches the guardian
// too. A unit that is already gone is not an error. It uses one plain godbus connection (no
// signal subscription) and closes it; ctx bounds everything.
func stopUnitAt(ctx context.Context, addrs []managerAddress, unit string) error {
	var errs []error
	for _, a := range addrs {
		err := stopUnitOnce(ctx, a, unit)
		if err == nil || errors.Is(err, ErrNoSuchUnit) {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a.addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("cannot stop %s: %w", unit, errors.Join(errs...))
}

func stopUnitOnce(ctx context.Context, a managerAddress, unit string) error {
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

// addressesOf is wireAddresses' inverse: the manager's addresses as the guardian got them
// (wireScope).
func addressesOf(w []wireAddress) []managerAddress {
	out := make([]managerAddress, len(w))
	for i, a := range w {
		out[i] = managerAddress{addr: a.Addr, hello: a.Hello}
	}
	return out
}
