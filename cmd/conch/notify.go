package main

import (
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifyFunc sends one sd_notify(3) message ("READY=1", "STATUS=...", several
// separated by newlines). A nil notifyFunc means conch does not run under a
// service manager that listens (D10).
type notifyFunc func(state string)

// notifierFor returns a notifyFunc when NOTIFY_SOCKET is set, else nil. The
// function may be called from several goroutines. Send errors are dropped:
// go-systemd's SdNotify returns (false, nil) when not under systemd (STYLE
// 12), and a manager that stopped listening is no reason to disturb the
// child. conch keeps NOTIFY_SOCKET in its own environment (the watchdog and
// late messages need it) and removes it from the child's (D5, childEnv).
func notifierFor(getenv func(string) string) notifyFunc {
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

// startWatchdog sends WATCHDOG=1 every half of the service's WatchdogSec=
// (WATCHDOG_USEC, when WATCHDOG_PID is unset or ours: go-systemd's
// SdWatchdogEnabled) for as long as conch waits or holds, so a conch that
// stops making progress is killed by systemd and restarted per Restart=.
// It starts one goroutine when the watchdog is on; the returned stop ends it
// and waits for it. With notify nil or no watchdog, it starts nothing.
func startWatchdog(notify notifyFunc) (stop func()) {
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
