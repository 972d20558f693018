package main

import "strings"

// notifyEscape doubles every backslash in the values of an sd_notify(3) message (lines
// "NAME=value"). systemd splits the message into its lines with its word extraction, which
// takes a backslash as an escape and drops it: a scope named
// conch-sema-batch\x2dworker-41.scope would show in `systemctl status` as
// conch-sema-batchx2dworker-41.scope, a name systemctl cannot find (systemd 252, measured in
// a node: tests/vm TestStatusNamesScope). With the backslash doubled, systemd keeps one,
// and STATUS= carries the unit's exact escaped name, which can be pasted into systemctl (D10a).
func notifyEscape(state string) string {
	return strings.ReplaceAll(state, `\`, `\\`)
}
