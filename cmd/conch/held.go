package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldSlot reads the slot a conch child was given from the environment conch set for it
// (D5, fleet.SlotFromEnv). A <name> or --max given on the command line (j) must name the same
// semaphore. It returns the slot, or the error --held ends with: a usage error outside a
// conch child with no name, errNotHeld when the environment cannot hold a slot of the
// semaphore named.
func (c *semaCmd) heldSlot(j job) (fleet.Slot, error) {
	s, err := fleet.SlotFromEnv(c.getenv)
	switch {
	case errors.Is(err, fleet.ErrNoSlotEnv) && j.name == "":
		return s, usagef("--held: not inside a command run by conch (no CONCH_SEMA, CONCH_REV, CONCH_LEASE): run it from the command conch started, as in: conch sema NAME --max N -- sh -c 'conch sema --held && step'")
	case errors.Is(err, fleet.ErrNoSlotEnv):
		return s, endf(errNotHeld, "", "%s[max=%d]: not held: this process was not started by conch (no CONCH_REV, CONCH_LEASE)", j.name, j.max)
	case err != nil:
		return s, usagef("--held: %v", err)
	case !s.Of(j.name, j.max):
		return s, endf(errNotHeld, "", "%s: not held: this process was given a slot of %s[max=%d] (CONCH_SEMA, CONCH_MAX)",
			slotName(j.name, j.max), s.Name, s.Max)
	}
	return s, nil
}

// slotName spells a semaphore as messages do: name[max], or name alone.
func slotName(name string, max int) string {
	if max == 0 {
		return name
	}
	return fmt.Sprintf("%s[max=%d]", name, max)
}

// held answers --held: nil (exit 0) when the slot of this conch child is held at one
// linearizable read (fleet.CheckHeld), errNotHeld with the reason when it is not, else as
// withClient (D3). With -v it says on stderr what it read.
func (c *semaCmd) held(j job) error {
	c.rep.bare = true
	s, err := c.heldSlot(j)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s[max=%d]", s.Name, s.Max)
	return c.withClient(j, what+": --held", func(ctx context.Context, cl *clientv3.Client) error {
		h, err := fleet.CheckHeld(ctx, cl, s)
		switch {
		case errors.Is(err, fleet.ErrNotHeld):
			return endf(errNotHeld, "", "%s", err)
		case err == nil && c.rep.verbose:
			fmt.Fprintf(c.stderr, "conch: %s: held: rank %d, rev %d, lease %s with %ds of %ds left, at revision %d\n",
				what, h.Rank, s.Rev, schema.FormatLeaseID(s.Lease), h.TTL.Left, h.TTL.Granted, h.ReadRev)
		}
		return err
	})
}

// checkHeldFlags refuses what --held cannot use.
func (c *semaCmd) checkHeldFlags() error {
	if c.dashdash {
		return usagef("--held takes no command: run it before the step, as in: conch sema --held && STEP")
	}
	for _, f := range append(c.runFlags(), flagGiven{"--change-max", c.ChangeMax}) {
		if f.set {
			return usagef("%s does not go with --held", f.flag)
		}
	}
	return nil
}
