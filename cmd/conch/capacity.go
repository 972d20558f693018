package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/conch-project/conch/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// One capacity per name (D17): a run, --pause, --resume or --release naming a --max other
// than the live one is refused (64), unless --change-max says the change is deliberate.

// capacityRefusal is the line of a refusal for ce: what was refused (what: "not started",
// "--pause refused"...), which capacities are live, why another --max is no good, and the
// two ways on (the live --max, or --change-max). Usage status (64): nothing was written.
func capacityRefusal(ce *sema.CapacityError, what string) error {
	live := ce.Live[len(ce.Live)-1]
	return endf(errUsage, "", "%s: %s is live with %s, not max=%d, and a different --max is a separate semaphore whose slots do not count against the live ones; nothing was started or kept. "+
		"Use --max %d, or add --change-max to change the capacity deliberately (a separate semaphore beside the old one while it drains)",
		what, ce.Name, sema.CapacityList(ce.Live), ce.Max, live)
}

// checkCapacity is D17's check for --resume and --release, which only delete: nil when the
// name has no keys under another capacity than j.max or --change-max was given (with a
// warning then), else capacityRefusal's error; errors of the read as sema.CheckCapacity's.
// The keys may change after the read: that window costs nothing, neither command adds a
// key. (A run checks at its enqueue's revision, --pause in the Txn of its write.)
func (c *semaCmd) checkCapacity(ctx context.Context, cl *clientv3.Client, j job, what string) error {
	err := sema.CheckCapacity(ctx, cl, j.name, j.max)
	var ce *sema.CapacityError
	switch {
	case !errors.As(err, &ce):
		return err
	case j.changeMax:
		c.warnCapacity(ce)
		return nil
	}
	return capacityRefusal(ce, what)
}

// warnCapacity is the warning of --change-max: the live capacities, and that the one given
// is a separate semaphore.
func (c *semaCmd) warnCapacity(ce *sema.CapacityError) {
	c.rep.warnf("WARNING: %s is also live with %s (--change-max): %s[max=%d] is a separate semaphore, whose slots do not count against theirs",
		ce.Name, sema.CapacityList(ce.Live), ce.Name, ce.Max)
}

// noKeysNote is what --pause adds when nothing at all is queued under the name (D17:
// pausing ahead of a window is legitimate, but a mistyped name would pause nothing), with
// hint (nameHint's, read before the pause was written: "" or "did you mean ...?").
func noKeysNote(ctx context.Context, cl *clientv3.Client, j job, hint string) string {
	caps, _, err := sema.LiveCapacities(ctx, cl, j.name)
	if err != nil || len(caps) > 0 {
		return ""
	}
	if hint != "" {
		return fmt.Sprintf(" (nothing is queued under %q now, under any --max: it pauses the runs to come; %s)", j.name, hint)
	}
	return fmt.Sprintf(" (nothing is queued under %q now, under any --max: it pauses the runs to come; check the name if you meant a running one)", j.name)
}
