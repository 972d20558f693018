package systemdtest

import (
	"context"
	"fmt"
	"os"
	"strconv"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// DialBus connects go-systemd to the node's system bus from the host (BusAddress), for
// assertions on the node's units (GetUnitProperties, ListUnits...). The connection lives until
// ctx ends or the caller Closes it (godbus ties it to the context it was dialled with). It
// fails when the node is not running.
func (n *Node) DialBus(ctx context.Context) (*sdbus.Conn, error) {
	addr := n.BusAddress()
	conn, err := sdbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial(addr, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Geteuid()))}); err != nil {
			_ = c.Close()
			return nil, err
		}
		if err := c.Hello(); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the system bus of node %s (%s): %w", n.name, addr, err)
	}
	return conn, nil
}
