package etcdconn

import (
	"context"
	"errors"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// reauthInterceptor returns a gRPC unary client interceptor for etcd's
// Authenticate call, the one clientv3 makes at start and whenever its token
// is invalidated or expires (its retry interceptor logs in again with the
// password it was given). It sends the password last known to work
// (initially pw); when etcd rejects it (ErrAuthFailed), it reads the
// password file at path once more and, if the password there differs,
// retries once with it and keeps it on success. So an operator who rotates
// the password (etcdctl user passwd, then the new one into the file) does
// not stop the running holders. Other calls pass through.
func reauthInterceptor(pw, path string) grpc.UnaryClientInterceptor {
	var mu sync.Mutex
	current := pw
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ar, ok := req.(*pb.AuthenticateRequest)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		mu.Lock()
		p := current
		mu.Unlock()
		err := invoker(ctx, method, &pb.AuthenticateRequest{Name: ar.Name, Password: p}, reply, cc, opts...)
		if !errors.Is(rpctypes.Error(err), rpctypes.ErrAuthFailed) {
			return err
		}
		fresh, _, rerr := ReadPassword(path)
		if rerr != nil || fresh == p {
			return err
		}
		if err = invoker(ctx, method, &pb.AuthenticateRequest{Name: ar.Name, Password: fresh}, reply, cc, opts...); err == nil {
			mu.Lock()
			current = fresh
			mu.Unlock()
		}
		return err
	}
}
