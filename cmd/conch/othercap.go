package main

import (
	"context"
	"slices"
	"strings"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keyCapacities returns the capacities, other than max and in increasing order, of the keys
// root+name+"/<max>" that exist (a pause key under schema.PauseRoot, a period marker under
// schema.OnceRoot): one keys-only read. Keys whose last segment is no capacity are skipped.
// Errors are the read's.
func keyCapacities(ctx context.Context, cl *clientv3.Client, root, name string, max int) ([]int, error) {
	resp, err := cl.Get(ctx, root+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var caps []int
	for _, kv := range resp.Kvs {
		n, err := schema.ParseMax(strings.TrimPrefix(string(kv.Key), root+name+"/"))
		if err == nil && n != max && !slices.Contains(caps, n) {
			caps = append(caps, n)
		}
	}
	slices.Sort(caps)
	return caps, nil
}

// elsewhere is D17 for the keys that outlive a run (a pause, a period marker), which live
// under root (schema.PauseRoot, schema.OnceRoot): when j's name has such a key under another
// capacity than j.max (and --change-max was not given), a usage error "what: NAME has KEY with
// max=M, not max=N; nothing was changed. Use conch sema NAME --max M fix"; else nil. A read
// that fails says nothing (nil): the command's own request reports etcd's trouble.
func (c *semaCmd) elsewhere(ctx context.Context, cl *clientv3.Client, j job, root, key, what, fix string) error {
	if j.changeMax {
		return nil
	}
	caps, err := keyCapacities(ctx, cl, root, j.name, j.max)
	if err != nil || len(caps) == 0 {
		return nil
	}
	return endf(errUsage, "", "%s: %s has %s with %s, not max=%d, and a different --max is a separate semaphore; nothing was changed. Use conch sema %s --max %d %s",
		what, j.name, key, sema.CapacityList(caps), j.max, j.name, caps[len(caps)-1], fix)
}
