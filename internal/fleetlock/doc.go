// Package fleetlock serves the FleetLock protocol (the reboot-lock protocol of Fedora
// CoreOS's zincati and of Flatcar's update agent) over HTTP, with each FleetLock group
// served as a conch semaphore (D19): a granted pre-reboot is a slot held after a run
// (internal/fleet's TakeHeld), a steady-state frees the node's slots held after a run
// (internal/fleet's ReleaseHeld, D14). It owns the protocol: the paths, the header, the request's
// schema, the error kinds and statuses, the node ids it accepts, the request counters, and
// the HTTP server's limits. State lives only in etcd, so several servers may serve one
// fleet. It names no flag of the program that uses it and decides no exit status.
package fleetlock
