// Package systemd is conch's plumbing to systemd: it owns the connection to the service
// manager (Dial, Connect, Available: the system manager as root, the user's own otherwise),
// transient scopes (ScopeName, StartScope, StopScope, StopUnitAt), the scope properties a
// caller may set and their systemd syntax (ParseProperty, SliceName), where a process sits in
// the unit tree (ReadPlacement, FindCallerService, InheritedProperties), journald's
// stdout streams (DialJournalStream, JournalRelay), and native journal entries (JournalFor,
// UnitFields; the caller chooses their message and fields).
//
// It knows nothing of semaphores, etcd or the program that uses it: errors say what systemd
// refused or what could not be reached (one sentinel block, errors.go), never an exit status
// or a flag. It imports only the standard library, go-systemd, godbus and x/sys, and does not
// log, exit or install signal handlers. Package unitrun runs a command in a scope with it;
// the guardian process uses StopUnitAt alone, so nothing here may cost the guardian's start
// (tables are built on first use).
package systemd
