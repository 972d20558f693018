package main

import (
	"fmt"
	"time"

	"github.com/conch-project/conch/internal/slotrun"
)

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
