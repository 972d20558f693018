package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/sema"
)

// heldSlot reads the slot a conch child was given from the environment conch set for it
// (D5, sema.SlotFromEnv). A <name> or --max given on the command line (j) must name the same
// semaphore. It returns the slot, or the error --held ends with: a usage error outside a
// conch child with no name, errNotHeld when the environment cannot hold a slot of the
// semaphore named.
func (c *semaCmd) heldSlot(j job) (sema.Slot, error) {
	s, err := sema.SlotFromEnv(c.getenv)
	switch {
	case errors.Is(err, sema.ErrNoSlotEnv) && j.name == "":
		return s, usagef("--held: not inside a command run by conch (no CONCH_SEMA, CONCH_REV, CONCH_LEASE): run it from the command conch started, as in: conch sema NAME --max N -- sh -c 'conch sema --held && step'")
	case errors.Is(err, sema.ErrNoSlotEnv):
		return s, endf(errNotHeld, "", "%s[%d]: not held: this process was not started by conch (no CONCH_REV, CONCH_LEASE)", j.name, j.max)
	case err != nil:
		return s, usagef("--held: %v", err)
	case !s.Of(j.name, j.max):
		return s, endf(errNotHeld, "", "%s: not held: this process was given a slot of %s[%d] (CONCH_SEMA, CONCH_MAX)",
			slotName(j.name, j.max), s.Name, s.Max)
	}
	return s, nil
}

// slotName spells a semaphore as messages do: name[max], or name alone.
func slotName(name string, max int) string {
	if max == 0 {
		return name
	}
	return fmt.Sprintf("%s[%d]", name, max)
}

// held answers --held: nil (exit 0) when the slot of this conch child is
// held at one linearizable read (sema.CheckHeld), errNotHeld with the
// reason when it is not, errUnavailable when etcd does not answer, errUsage when it
// refuses (exitStatus maps them, D3).
// With -v it says on stderr what it read.
func (c *semaCmd) held(j job) error {
	c.rep.bare = true
	s, err := c.heldSlot(j)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s[%d]", s.Name, s.Max)
	client, err := etcdconn.New(context.Background(), j.conn)
	if err != nil {
		return fmt.Errorf("%s: --held: %w", what, err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), j.conn.DialTimeout)
	defer cancel()
	h, err := sema.CheckHeld(ctx, client, s)
	switch {
	case errors.Is(err, sema.ErrNotHeld):
		return endf(errNotHeld, "", "%s", err)
	case errors.Is(err, sema.ErrRefused):
		return endf(errUsage, "", "%s: --held: %s refused the read: %v", what, j.conn.Where(), err)
	case err != nil:
		return endf(errUnavailable, "", "%s: --held: cannot read from %s: %v", what, j.conn.Where(), err)
	}
	if c.rep.verbose {
		fmt.Fprintf(c.stderr, "conch: %s: held: rank %d, rev %d, lease %s with %ds of %ds left, at revision %d\n",
			what, h.Rank, s.Rev, sema.FormatLeaseID(s.Lease), h.TTL.Left, h.TTL.Granted, h.ReadRev)
	}
	return nil
}

// checkHeldFlags refuses what --held cannot use.
func (c *semaCmd) checkHeldFlags() error {
	if c.dashdash {
		return usagef("--held takes no command: run it before the step, as in: conch sema --held && STEP")
	}
	for flag, set := range map[string]bool{"--who": c.Who, "--json": c.JSON, "--format": c.Format != "", "--textfile": c.Textfile != "",
		"--watch": c.Watch, "--wait": c.Wait.set, "--nonblock": c.Nonblock,
		"--spread": c.Spread, "--runtime-max": c.RuntimeMax.set, "-p": len(c.Property) > 0, "--slice": c.Slice != "",
		"--hold-after": c.HoldAfter.set, "--once-per": c.OncePer.set, "--deadline": c.Deadline != "",
		"--release": c.Release, "--pause": c.Pause, "--resume": c.Resume, "--reason": c.Reason != ""} {
		if set {
			return usagef("%s does not go with --held", flag)
		}
	}
	return nil
}
