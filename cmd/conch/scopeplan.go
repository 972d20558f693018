package main

import (
	"sync"

	"github.com/conch-project/conch/unitrun"
)

// planning is the run's scope plan (D8) being decided beside the etcd round trips where
// systemd runs (unitrun.StartPlanning, D8b); without systemd, or with --scope=never, it is
// decided at once, before any etcd call, as D8 says: --scope=always then exits 69 having
// written nothing.
type planning struct {
	*unitrun.Planning
	reported sync.Once // the line of --scope=auto falling back to direct mode
}

// startPlanning starts deciding the plan for f; wait returns it.
func startPlanning(f scopeFlags) *planning {
	return &planning{Planning: unitrun.StartPlanning(f.opts)}
}

// intent reports whether the child is meant to run in a scope, for the record written at the
// enqueue (sema.Record.Scope, D6), without waiting for the plan (unitrun's Intent). As with a
// scope that cannot be created after the slot (D3), --scope=auto then runs the child directly
// with the record saying scope.
func (p *planning) intent() bool { return p.Intent() }

// decided reports whether the plan is decided already, so that wait does not block.
func (p *planning) decided() bool { return p.Decided() }

// wait blocks until the plan is decided and returns it, or the error that ends the run (69)
// for --scope=always without a scope. The first call from rep's goroutine (report true)
// prints, once, why --scope=auto runs the child directly; the prestarter's calls it with
// report false.
func (p *planning) wait(rep *reporter, report bool) (scopePlan, error) {
	plan, err := p.Wait()
	if err != nil {
		return scopePlan{}, endf(errUnavailable, "", "cannot run the child in a systemd scope (--scope=always, -p or --slice): %v", err)
	}
	if why := plan.Fallback(); report && why != nil {
		p.reported.Do(func() {
			rep.line("", true, "no systemd scope (%v): the child runs under conch's own supervision", why)
		})
	}
	return scopePlan{plan}, nil
}

// close waits for the plan and closes it.
func (p *planning) close() { p.Close() }
