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
	done   chan struct{} // closed when plan and err are set
	primed chan struct{} // closed when systemd.PrimeMove returned; nil when it was not called
	plan   *Plan
	err    error
}

// StartPlanning starts deciding the Plan for opts and returns at once; Wait returns it. Where
// systemd runs and opts allows a scope it starts two goroutines: one decides the Plan and ends
// within DefaultDialTimeout; the other readies the kernel for the scope's cgroup move
// (systemd.PrimeMove, D8d) and ends once the kernel has moved conch where it already is (a
// grace period of the kernel's, milliseconds). Close joins both and releases the Plan.
func StartPlanning(opts ScopeOptions) *Planning {
	p := &Planning{done: make(chan struct{})}
	if opts.Mode == ScopeNever || !systemd.Booted() {
		p.plan, p.err = DecideScope(opts)
		close(p.done)
		return p
	}
	p.primed = make(chan struct{})
	go func() {
		defer close(p.primed)
		_ = systemd.PrimeMove() // only saves time: an error leaves the move to pay its own wait
	}()
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

// Close waits for the Plan and for PrimeMove's goroutine, and closes the Plan.
func (p *Planning) Close() {
	<-p.done
	if p.primed != nil {
		<-p.primed
	}
	if p.plan != nil {
		p.plan.Close()
	}
}
