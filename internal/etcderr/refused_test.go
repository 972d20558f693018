package etcderr

import (
	"context"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// etcd's refusals, as clientv3 returns them and wrapped, are refusals; failures to answer
// and nil are not.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrPermissionDenied, true},
		{rpctypes.ErrAuthFailed, true},
		{rpctypes.ErrGRPCUserEmpty, true},
		{fmt.Errorf("enqueue: %w", rpctypes.ErrPermissionDenied), true},
		{status.Error(codes.OutOfRange, "ttl too large"), true},
		{rpctypes.ErrGRPCNoLeader, false},
		{status.Error(codes.Unavailable, "connection refused"), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := Refused(c.err); got != c.want {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
