// Package systemdtest boots throw-away Debian 12 "nodes" with a real systemd as PID 1 and a
// real system bus, for integration tests of conch's scope mode (D7, D8) and the multi-node
// tests under tests/vm. No mocks: each node is a systemd-nspawn container.
//
// A node is an overlayfs over one shared, read-only root filesystem built once by
// tests/vm/mkrootfs.sh and cached under /var/cache/conch-test (EnsureRootfs). Boot starts
// systemd-nspawn from a fresh cgroup of its own (in the name=systemd and the unified
// hierarchy), sharing the host's network namespace unless Options.NetNS names another, and
// returns once the boot is over: `systemctl is-system-running` says running or degraded, or
// default.target is active while a unit outside the boot still starts. Everything
// Boot creates (processes, cgroups, the overlay mount, temporary directories) is removed in
// t.Cleanup, also when the test fails; tests/vm/cleanup.sh removes what a killed test binary
// left behind.
//
// Code under test runs inside a node as a transient service (Node.Run, Node.Start): a process
// started with nsenter stays in the host's cgroup, so only a unit gives it a place in the
// node's own cgroup tree. Node.Nsenter runs a command outside any unit, as from a login shell.
//
// Prerequisites: root, systemd-nspawn, nsenter, overlayfs, cgroup2. When one is missing and CI
// is not "true" the test is skipped with a message saying how to get it; under CI=true nothing
// is skipped: EnsureRootfs installs what is missing (tests/vm/mkrootfs.sh) or the test fails.
// The facts these choices rest on are in shared/TESTING-INFRA.md.
package systemdtest
