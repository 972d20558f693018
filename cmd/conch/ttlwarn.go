package main

import (
	"fmt"
	"time"

	"github.com/conch-project/conch/internal/slotrun"
	"github.com/conch-project/conch/sema"
)

// leaseCheck returns the OnEvent hook that looks once at the lease etcd granted (the first
// event that carries its TTL): with -v it says when etcd raised --ttl to its minimum (D4:
// used as granted), and it warns when the child's stop grace killAfter is too long to fence
// within that lease (D7), naming the granted TTL, a --ttl that fits and a --kill-after that
// fits. The warning is a fact of the command line, the same on every run: -q silences it on
// stderr, so a cron job is mailed only when something is wrong (the journal still gets it; D4a).
func (r *semaRun) leaseCheck(killAfter time.Duration) func(sema.Event) {
	done := false
	return func(e sema.Event) {
		if done || e.TTL <= 0 {
			return
		}
		done = true
		if asked := r.job.run.ttl; e.TTL > asked {
			r.rep.line("", true, "etcd granted a %v lease for --ttl %v (its minimum TTL): using %v", e.TTL, asked, e.TTL)
		}
		if !sema.FenceTooLate(e.TTL, killAfter) || (r.job.run.quiet && r.rep.journal == nil) {
			return
		}
		r.rep.warnf("WARNING: %s", shortTTLAdvice(e.TTL, killAfter))
	}
}

// shortTTLAdvice is the warning's text for a granted lease ttl too short to stop a child
// with the grace killAfter before the lease could expire (sema.FenceTooLate).
func shortTTLAdvice(ttl, killAfter time.Duration) string {
	msg := fmt.Sprintf("--kill-after %v is too long to stop the child before a %v lease could expire; conch will stop it at the first failed keep-alive (to stop it only when the lease is really at risk, use --ttl %v or more",
		killAfter, ttl, slotrun.MinTTL(killAfter))
	if k := slotrun.MaxKillAfter(ttl); k > 0 {
		msg += fmt.Sprintf(", or --kill-after %v or less", k)
	}
	return msg + ")"
}
