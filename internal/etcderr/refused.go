// Package etcderr classifies etcd's errors for the packages that talk to etcd (the semaphore
// recipe and the connection), which must not import each other.
package etcderr

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refused reports whether err (a clientv3 error, wrapped or not) is etcd rejecting the request
// itself rather than failing to answer: permission denied, bad credentials (a refused login),
// an invalid argument or one out of range (e.g. a TTL above etcd's maximum). Retrying such a
// request cannot succeed. Other errors (unavailable, deadline exceeded) and nil are not
// refusals.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return false
	}
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.OutOfRange:
		return true
	}
	return false
}
