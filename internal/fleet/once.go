// The period's marker reset by hand (D15).

package fleet

import (
	"context"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ResetOnce deletes the period marker of (name, max) (D15), whatever its value, so that the
// next run of a job with a period runs. It returns the marker it deleted and whether there was one
// (false: the period was open, nothing done). Errors wrap schema.ErrBadName or schema.ErrBadMax,
// sema.ErrRefused when etcd rejects the delete, else sema.ErrUnavailable.
func ResetOnce(ctx context.Context, c *clientv3.Client, name string, max int) (schema.Marker, bool, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return schema.Marker{}, false, err
	}
	key := schema.OnceKey(name, max)
	resp, err := c.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return schema.Marker{}, false, sema.EtcdFailure("cannot delete "+key, err)
	}
	if len(resp.PrevKvs) == 0 {
		return schema.Marker{}, false, nil
	}
	return schema.DecodeMarker(resp.PrevKvs[0]), true, nil
}
