package systemd

import (
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// NotifyFunc sends one sd_notify(3) message ("READY=1", "STATUS=...", several
// separated by newlines). A nil NotifyFunc means the process does not run under a
// service manager that listens (D10).
type NotifyFunc func(state string)

// NotifierFor returns a NotifyFunc when getenv("NOTIFY_SOCKET") is set, else nil. The
// function may be called from several goroutines. Send errors are dropped:
// go-systemd's SdNotify returns (false, nil) when not under systemd, and a manager
// that stopped listening is no reason to disturb the caller's work. The caller keeps
// NOTIFY_SOCKET in its own environment (the watchdog and late messages need it).
func NotifierFor(getenv func(string) string) NotifyFunc {
	if getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	var mu sync.Mutex
	return func(state string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = daemon.SdNotify(false, state)
	}
}

// StartWatchdog sends WATCHDOG=1 through notify every half of the service's
// WatchdogSec= (WATCHDOG_USEC, when WATCHDOG_PID is unset or ours: go-systemd's
// SdWatchdogEnabled) until stop, so a process that stops making progress is killed by
// systemd and restarted per Restart=. It starts one goroutine when the watchdog is on;
// the returned stop ends it and waits for it. With notify nil or no watchdog, it starts
// nothing.
func StartWatchdog(notify NotifyFunc) (stop func()) {
	if notify == nil {
		return func() {}
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval / 2)
		defer tick.Stop()
		notify(daemon.SdNotifyWatchdog)
		for {
			select {
			case <-tick.C:
				notify(daemon.SdNotifyWatchdog)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// NotifyEscape doubles every backslash in the values of an sd_notify(3) message (lines
// "NAME=value"). systemd splits the message into its lines with its word extraction, which
// takes a backslash as an escape and drops it: a scope named
// conch-sema-batch\x2dworker-41.scope would show in `systemctl status` as
// conch-sema-batchx2dworker-41.scope, a name systemctl cannot find (systemd 252). With the
// backslash doubled, systemd keeps one, and STATUS= carries the unit's exact escaped name,
// which can be pasted into systemctl (D10a).
func NotifyEscape(state string) string {
	return strings.ReplaceAll(state, `\`, `\\`)
}
