package main

import "github.com/conch-project/conch/internal/systemd"

// sd_notify(3) and the watchdog (D10) are internal/systemd's; conch keeps NOTIFY_SOCKET in its
// own environment and removes it from the child's (D5, childEnv).
type notifyFunc = systemd.NotifyFunc

var (
	notifierFor   = systemd.NotifierFor   // nil without NOTIFY_SOCKET
	startWatchdog = systemd.StartWatchdog // WATCHDOG=1 while conch waits or holds
	notifyEscape  = systemd.NotifyEscape  // a backslash survives systemd's word extraction
)
