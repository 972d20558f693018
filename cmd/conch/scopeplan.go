package main

import (
	"os"
	"sync"
)

// planning is the scope plan of a run (decideScope, D8) being decided on a goroutine of its own
// when systemd is the init system, so that its D-Bus round trips (connecting to the manager,
// reading the service's limits: several milliseconds) overlap the etcd connection, the lease
// grant and the enqueue instead of preceding them (D8b). Without systemd, or with
// --scope=never, it is decided at once, before any etcd call, as D8 says: --scope=always then
// exits 69 having written nothing.
type planning struct {
	flags scopeFlags
	done  chan struct{} // closed when plan, note and err are set
	plan  *scopePlan
	note  string // decideScope's line for --scope=auto falling back to direct mode
	err   error

	reported sync.Once
}

// startPlanning starts deciding the plan for f (decideScope); wait returns it.
func startPlanning(f scopeFlags) *planning {
	p := &planning{flags: f, done: make(chan struct{})}
	if f.mode == scopeNever || !systemdBooted() {
		p.plan, p.note, p.err = decideScope(f)
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		p.plan, p.note, p.err = decideScope(f)
	}()
	return p
}

// systemdBooted reports whether systemd is the init system, as systemd.Dial checks first.
func systemdBooted() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// intent reports whether the child is meant to run in a scope, for the record written at the
// enqueue (sema.Record.Scope, D6), without waiting for the plan: the plan's own answer once
// decided, else true (the plan is decided on a goroutine only where systemd runs and the
// mode allows a scope). As with a scope that cannot be created after the slot (D3), --scope=auto
// then runs the child directly with the record saying scope.
func (p *planning) intent() bool {
	select {
	case <-p.done:
		return p.err == nil && p.plan.inScope()
	default:
		return true
	}
}

// decided reports whether the plan is decided already (at once without systemd or with
// --scope=never, D8), so that wait does not block.
func (p *planning) decided() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait blocks until the plan is decided and returns it (nil with the error that ends the run
// for --scope=always without a scope). The first call from rep's goroutine (report true)
// prints decideScope's line for --scope=auto, once; the prestarter's goroutine calls it with
// report false.
func (p *planning) wait(rep *reporter, report bool) (*scopePlan, error) {
	<-p.done
	if report && p.note != "" {
		p.reported.Do(func() { rep.line("", true, "%s", p.note) })
	}
	return p.plan, p.err
}

// close waits for the plan and closes it.
func (p *planning) close() {
	<-p.done
	if p.plan != nil {
		p.plan.close()
	}
}
