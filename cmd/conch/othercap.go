package main

import (
	"context"
	"slices"
	"strings"

	"github.com/conch-project/conch/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keyCapacities returns the capacities, other than max and in increasing order, of the keys
// root+name+"/<max>" that exist (a pause key under sema.PauseRoot, a period marker under
// sema.OnceRoot): one keys-only read. Keys whose last segment is no capacity are skipped.
// Errors are the read's.
func keyCapacities(ctx context.Context, cl *clientv3.Client, root, name string, max int) ([]int, error) {
	resp, err := cl.Get(ctx, root+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var caps []int
	for _, kv := range resp.Kvs {
		n, err := sema.ParseMax(strings.TrimPrefix(string(kv.Key), root+name+"/"))
		if err == nil && n != max && !slices.Contains(caps, n) {
			caps = append(caps, n)
		}
	}
	slices.Sort(caps)
	return caps, nil
}

// otherPause is D17 for the pause key: when j's name is paused under another capacity than
// j.max (and --change-max was not given), a usage error naming that capacity and what to run
// instead (fix, after "conch sema NAME --max N"); else nil. what is the refused operation
// ("--resume refused"). A read that
// fails says nothing (nil): the operation's own request reports etcd's trouble.
func (c *semaCmd) otherPause(ctx context.Context, cl *clientv3.Client, j job, what, fix string) error {
	if j.changeMax {
		return nil
	}
	caps, err := keyCapacities(ctx, cl, sema.PauseRoot, j.name, j.max)
	if err != nil || len(caps) == 0 {
		return nil
	}
	return endf(errUsage, "", "%s: %s is paused with %s, not max=%d, and a different --max is a separate semaphore; nothing was changed. "+
		"Use conch sema %s --max %d %s, or add --change-max to act on max=%d deliberately",
		what, j.name, sema.CapacityList(caps), j.max, j.name, caps[len(caps)-1], fix, j.max)
}

// otherMarker is otherPause for the period marker of --once-per (D15, D17).
func (c *semaCmd) otherMarker(ctx context.Context, cl *clientv3.Client, j job) error {
	if j.changeMax {
		return nil
	}
	caps, err := keyCapacities(ctx, cl, sema.OnceRoot, j.name, j.max)
	if err != nil || len(caps) == 0 {
		return nil
	}
	return endf(errUsage, "", "--reset-period refused: %s has its period marker with %s, not max=%d; nothing was deleted. Use conch sema %s --max %d --reset-period",
		j.name, sema.CapacityList(caps), j.max, j.name, caps[len(caps)-1])
}
