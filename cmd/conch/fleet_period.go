package main

import (
	"context"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// resetPeriod is --reset-period (D15): it deletes the period marker of --once-per, if any,
// and says whose run it was. Exit 0 either way; 69 when etcd does not answer, 64 when it
// refuses (D3) or the name's marker is under another capacity (D17).
func (c *semaCmd) resetPeriod(j job) error {
	return c.withClient(j, "--reset-period", func(ctx context.Context, cl *clientv3.Client) error {
		m, had, err := fleet.ResetOnce(ctx, cl, j.name, j.max)
		switch {
		case err == nil && had && m.Err != nil:
			c.rep.line("", false, "period open again: deleted an unreadable marker; the next run runs")
		case err == nil && had:
			c.rep.line("", false, "period open again: deleted the marker of the run on %s (rev %d, ended %s); the next run runs",
				who.SafeText(m.Node), m.Rev, timeOrUnknown(m.End))
		case err == nil:
			if err := c.elsewhere(ctx, cl, j, schema.OnceRoot, "its period marker", "--reset-period refused", "--reset-period"); err != nil { // D17: the marker is elsewhere
				return err
			}
			c.rep.line("", false, "no period marker: the period is open, nothing to reset%s", hintNote(ctx, cl, j.name))
		}
		return err
	})
}
