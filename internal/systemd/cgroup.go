package systemd

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Placement says where a process sits in systemd's unit tree, read from its cgroup (D8).
type Placement struct {
	// Cgroup is the process's cgroup path as systemd tracks it: the unified hierarchy's on
	// pure cgroup2 hosts, the name=systemd one's on legacy and hybrid hosts.
	Cgroup string
	// Unit is the innermost unit holding the process ("conch-job.service",
	// "session-3.scope"), "" when it is in no unit (the root cgroup, or a slice itself).
	Unit string
	// Slice is the slice Unit belongs to ("system.slice", "app.slice"); "-.slice" for the root.
	Slice string
}

// Service returns the service the process runs in, or an error wrapping ErrNotInService when
// its unit is not a service (a login session's scope, for instance). D8: the child's scope is
// then bound to that service and inherits its limits.
func (p Placement) Service() (string, error) {
	if !strings.HasSuffix(p.Unit, ".service") {
		return "", fmt.Errorf("%w: cgroup %s", ErrNotInService, p.Cgroup)
	}
	return p.Unit, nil
}

// ReadPlacement reads /proc/PID/cgroup (pid 0: the calling process) and returns where the
// process runs for the system manager (user false) or for the user's own manager (user true,
// as with systemd-run --user: the tree below user@UID.service). It returns an error when the
// file cannot be read or holds no hierarchy systemd tracks units in.
func ReadPlacement(pid int, user bool) (Placement, error) {
	path := "/proc/self/cgroup"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/cgroup"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Placement{}, fmt.Errorf("cannot read the cgroup of process %d: %w", pid, err)
	}
	return parsePlacement(data, unifiedCgroups(), user)
}

// OwnUnit returns the unit the calling process runs in, for the manager Connect talks to
// (ReadPlacement of this process, UserManager), or "" when it is in none or its cgroup cannot
// be read.
func OwnUnit() string {
	place, err := ReadPlacement(0, UserManager())
	if err != nil {
		return ""
	}
	return place.Unit
}

// unifiedCgroups reports whether /sys/fs/cgroup is a cgroup2 file system, i.e. systemd runs in
// unified mode and tracks units in the "0::" hierarchy. Otherwise (hybrid or legacy mode) it
// tracks them in the v1 name=systemd hierarchy. /proc/PID/cgroup alone cannot tell: it lists
// every hierarchy the kernel has, also those a container does not use.
func unifiedCgroups() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// parsePlacement is ReadPlacement on the contents of a /proc/PID/cgroup file, taking the
// "0::" line in unified mode, else the name=systemd one (or "0::" when there is none).
func parsePlacement(procCgroup []byte, unified, user bool) (Placement, error) {
	var v1, v2 string
	var hasV1, hasV2 bool
	for _, line := range strings.Split(string(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "name=systemd":
			v1, hasV1 = parts[2], true
		case parts[0] == "0" && parts[1] == "":
			v2, hasV2 = parts[2], true
		}
	}
	cgroup := v2
	switch {
	case hasV1 && !unified:
		cgroup = v1
	case !hasV2:
		return Placement{}, fmt.Errorf("no systemd cgroup hierarchy in %q", procCgroup)
	}
	p := placementOf(cgroup, user)
	p.Cgroup = cgroup
	return p, nil
}

// placementOf finds the unit and slice of a cgroup path as systemd's cg_path_get_unit and
// cg_path_get_user_unit do: leading slices are skipped, the first other component is the unit,
// and anything below it is the unit's own business (delegated sub-cgroups). For the user
// manager the walk starts again below user@UID.service.
func placementOf(cgroup string, user bool) Placement {
	parts := strings.Split(strings.Trim(cgroup, "/"), "/")
	if user {
		i := 0
		for i < len(parts) && !isUserManager(cgUnescape(parts[i])) {
			i++
		}
		if i == len(parts) {
			return Placement{}
		}
		parts = parts[i+1:]
	}
	p := Placement{Slice: "-.slice"}
	for _, part := range parts {
		name := cgUnescape(part)
		if name == "" {
			continue
		}
		if strings.HasSuffix(name, ".slice") {
			p.Slice = name
			continue
		}
		if validUnitName(name) {
			p.Unit = name
		}
		break
	}
	return p
}

// isUserManager reports whether name is user@UID.service, the unit of a user's manager.
func isUserManager(name string) bool {
	uid, ok := strings.CutPrefix(name, "user@")
	if !ok {
		return false
	}
	uid, ok = strings.CutSuffix(uid, ".service")
	_, err := strconv.ParseUint(uid, 10, 32)
	return ok && err == nil
}

// cgUnescape undoes systemd's cg_escape, which prefixes "_" to cgroup names that could clash
// with the kernel's own files (e.g. "cpu.service" becomes "_cpu.service").
func cgUnescape(part string) string {
	return strings.TrimPrefix(part, "_")
}
