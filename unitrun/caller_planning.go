package unitrun

// This file runs in the caller's process (conch): a Plan decided beside the caller's other
// round trips (D8b).

import "github.com/conch-project/conch/internal/systemd"

// Planning is a Plan being decided (DecideScope) on a goroutine of its own when systemd is the
// init system, so that its D-Bus round trips (connecting to the manager, reading the service's
// limits: several milliseconds) overlap the caller's own start-up instead of preceding it
// (D8b). Without systemd, or with ScopeNever, it is decided at once, so that ScopeAlways fails
// before the caller has done anything (D8).
type Planning struct {
	done chan struct{} // closed when plan and err are set
	plan *Plan
	err  error
}

// StartPlanning starts deciding the Plan for opts and returns at once; Wait returns it. The
// goroutine it may start ends by itself within DefaultDialTimeout. Close releases the Plan.
func StartPlanning(opts ScopeOptions) *Planning {
	p := &Planning{done: make(chan struct{})}
	if opts.Mode == ScopeNever || !systemd.Booted() {
		p.plan, p.err = DecideScope(opts)
		close(p.done)
		return p
	}
	go func() { _ = systemd.PrimeMove() }() // the scope's start will move a process (D8d)
	go func() {
		defer close(p.done)
		p.plan, p.err = DecideScope(opts)
	}()
	return p
}

// Intent reports, without waiting, whether commands are meant to run in a scope: the Plan's
// InScope once decided, else true (it is decided on a goroutine only where systemd runs and
// the mode allows a scope).
func (p *Planning) Intent() bool {
	select {
	case <-p.done:
		return p.err == nil && p.plan.InScope()
	default:
		return true
	}
}

// Decided reports whether the Plan is decided already, so that Wait does not block.
func (p *Planning) Decided() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait blocks until the Plan is decided and returns DecideScope's result: the Plan, or nil
// and the error of ScopeAlways without a scope. It may be called any number of times, from
// any goroutine.
func (p *Planning) Wait() (*Plan, error) {
	<-p.done
	return p.plan, p.err
}

// Close waits for the Plan and closes it.
func (p *Planning) Close() {
	<-p.done
	if p.plan != nil {
		p.plan.Close()
	}
}
