// The period's marker reset by hand (D15).

package fleet

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/sema"
)

// ResetOnce deletes the period marker of (name, max) (D15), whatever its value, so that the
// next run of a job with a period runs. It returns the marker it deleted and whether there was one
// (false: the period was open, nothing done). Errors wrap sema.ErrBadName or sema.ErrBadMax,
// sema.ErrRefused when etcd rejects the delete, else sema.ErrUnavailable.
func ResetOnce(ctx context.Context, c *clientv3.Client, name string, max int) (sema.Marker, bool, error) {
	if err := validate(name, max); err != nil {
		return sema.Marker{}, false, err
	}
	key := sema.OnceKey(name, max)
	resp, err := c.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return sema.Marker{}, false, etcdFailure("cannot delete "+key, err)
	}
	if len(resp.PrevKvs) == 0 {
		return sema.Marker{}, false, nil
	}
	return sema.DecodeMarker(resp.PrevKvs[0]), true, nil
}
