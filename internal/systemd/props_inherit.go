package systemd

import (
	"context"
	"fmt"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// inheritedProps are the resource-control settings a scope takes over from the service conch
// runs in (D8), by D-Bus name. All are uint64, and UINT64_MAX means "not set" for each (no
// limit, or no weight: CGROUP_WEIGHT_INVALID).
var inheritedProps = []string{"MemoryMax", "MemoryHigh", "CPUQuotaPerSecUSec", "CPUWeight", "TasksMax", "IOWeight"}

// InheritedProperties reads the resource-control settings of service (e.g. from
// Placement.Service) over conn and returns those that are set (MemoryMax, MemoryHigh,
// CPUQuota, CPUWeight, TasksMax, IOWeight), ready for ScopeRequest.Properties, so that moving
// the command out of the service's cgroup into its scope does not lift its limits (D8). Put
// the -p properties after them: they override. TasksMax is usually set, to the manager's
// DefaultTasksMax, which a scope would get anyway. ctx bounds the call; errors name the
// service and wrap ErrNoSuchUnit, ErrAccessDenied or ErrBusUnavailable.
func InheritedProperties(ctx context.Context, conn *sdbus.Conn, service string) ([]sdbus.Property, error) {
	all, err := conn.GetUnitTypePropertiesContext(ctx, service, "Service")
	if err != nil {
		return nil, fmt.Errorf("cannot read the resource limits of %s: %w", service, dbusError(err))
	}
	return pickInherited(all), nil
}

// pickInherited keeps the inheritable settings of a service's properties that are set.
func pickInherited(all map[string]any) []sdbus.Property {
	var props []sdbus.Property
	for _, name := range inheritedProps {
		if v, ok := all[name].(uint64); ok && v != infinity {
			props = append(props, prop(name, v))
		}
	}
	return props
}

// CallerService is the systemd service the calling process runs in, which a scope it starts
// is bound to (D8). The zero value means the caller is in no service (a login shell, a
// scope, no systemd): the scope is then bound to nothing.
type CallerService struct {
	Unit      string           // the service, for BindsTo= ("" when in no service)
	Slice     string           // its slice: the scope's slice unless the caller chose another
	Inherited []sdbus.Property // its resource-control settings that are set (InheritedProperties)
}

// FindCallerService reads the caller's placement (/proc/self/cgroup, ReadPlacement) and, when
// it runs in a service, that service's resource-control settings over conn. Call it before
// the slot is taken: it costs a D-Bus round trip that would otherwise sit between the slot
// and the child's start. A caller in no service gets the zero value and no error. ctx bounds
// the call; errors are InheritedProperties'.
func FindCallerService(ctx context.Context, conn *sdbus.Conn) (CallerService, error) {
	place, err := ReadPlacement(0, UserManager())
	if err != nil {
		return CallerService{}, nil // no placement known: nothing to bind to
	}
	svc, err := place.Service()
	if err != nil {
		return CallerService{}, nil
	}
	inherited, err := InheritedProperties(ctx, conn, svc)
	if err != nil {
		return CallerService{}, err
	}
	return CallerService{Unit: svc, Slice: place.Slice, Inherited: inherited}, nil
}
