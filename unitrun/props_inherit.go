package unitrun

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
