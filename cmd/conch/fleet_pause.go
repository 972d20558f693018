package main

import (
	"context"
	"errors"
	"os/user"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pause is --pause (D16): it writes the semaphore's pause key, unless one is
// there, and says which. Exit 0 either way; 69 when etcd does not answer,
// 64 when it refuses (D3), or when the name is paused under another capacity
// or live with one (D17).
func (c *semaCmd) pause(j job) error {
	return c.withClient(j, "--pause", func(ctx context.Context, cl *clientv3.Client) error {
		set := fleet.SetPause
		if j.changeMax {
			set = fleet.SetPauseAnyCapacity
			if err := c.checkCapacity(ctx, cl, j, "--pause"); err != nil { // the warning
				return err
			}
		}
		if err := c.elsewhere(ctx, cl, j, schema.PauseRoot, "its pause", "--pause refused", "--who to see that pause"); err != nil { // D17
			return err
		}
		hint := nameHint(ctx, cl, j.name, schema.Record{}) // before the pause makes the name live
		p, wrote, err := set(ctx, cl, j.name, j.max, whoAmI(j), c.Reason)
		var ce *sema.CapacityError
		switch {
		case errors.As(err, &ce): // D17, checked in the pause's own Txn
			return capacityRefusal(ce, "--pause refused")
		case err == nil && wrote:
			c.rep.line("", false, "paused: no new holder starts until `conch sema %s --max %d --resume`; running commands go on%s", j.name, j.max, noKeysNote(ctx, cl, j, hint))
		case err == nil:
			c.rep.line("", false, "already %s: left as it was", who.PauseText(p))
		}
		return err
	})
}

// resume is --resume (D16): it deletes the pause key, if any, and says
// which. Exit 0 either way; 69 or 64 as pause (a pause only under another
// capacity is 64, D17: a resume that resumes nothing must not say all is well).
func (c *semaCmd) resume(j job) error {
	return c.withClient(j, "--resume", func(ctx context.Context, cl *clientv3.Client) error {
		if err := c.checkCapacity(ctx, cl, j, "--resume refused"); err != nil { // D17
			return err
		}
		p, had, err := fleet.Resume(ctx, cl, j.name, j.max)
		switch {
		case err == nil && had:
			c.rep.line("", false, "resumed: waiters start again (it was %s)", who.PauseText(p))
		case err == nil:
			if err := c.elsewhere(ctx, cl, j, schema.PauseRoot, "its pause", "--resume refused", "--resume"); err != nil { // D17: the pause is elsewhere
				return err
			}
			c.rep.line("", false, "not paused: nothing to resume%s", hintNote(ctx, cl, j.name))
		}
		return err
	})
}

// whoAmI is the pause's who: user@node (D16), the user as the system names
// the caller's uid.
func whoAmI(j job) string {
	name := "?"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return name + "@" + j.hostName()
}

// pausedText is who.PauseText of p (what etcd held, made safe for a line), "" for nil.
func pausedText(p *schema.Pause) string {
	if p == nil {
		return ""
	}
	return who.PauseText(*p)
}
