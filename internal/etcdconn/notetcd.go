package etcdconn

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// httpStatusRE finds the HTTP status in grpc-go's error for a server that
// answered a gRPC call with plain HTTP: "unexpected HTTP status code
// received from server: 404 (Not Found); transport: ...".
var httpStatusRE = regexp.MustCompile(`unexpected HTTP status code received from server: (\d{3}) \(([^)]{0,40})\)`)

// notEtcdInterceptor returns a gRPC unary client interceptor that rewrites
// the error of a call answered by something that speaks HTTP but is not
// etcd's gRPC (a web server, a proxy's error page, another service on the
// port) as "not an etcd: it answered HTTP 404 (Not Found) ...", keeping the
// gRPC code, so retries and the caller's handling stay as they were: the
// message says what answered, not only "no answer within the dial timeout". The server's
// response body, which grpc-go quotes on lines of its own, is dropped.
// Other errors pass through.
func notEtcdInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return notEtcd(invoker(ctx, method, req, reply, cc, opts...))
	}
}

// notEtcd is the rewrite of notEtcdInterceptor; nil and other errors are returned as they are.
func notEtcd(err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	msg := st.Message()
	if m := httpStatusRE.FindStringSubmatch(msg); m != nil {
		return status.Errorf(st.Code(), notEtcdPrefix+"it answered HTTP %s (%s) where etcd's gRPC was expected (a web server or proxy on that port?)", m[1], m[2])
	}
	if strings.Contains(msg, "received unexpected content-type") {
		return status.Error(st.Code(), notEtcdPrefix+"it answered HTTP, but not gRPC (a web server or proxy on that port?)")
	}
	return err
}

// notEtcdPrefix starts the message of every error notEtcd makes.
const notEtcdPrefix = "not an etcd: "

// IsNotEtcd reports whether err is (or wraps) an error notEtcd made.
func IsNotEtcd(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	return errors.As(err, &se) && strings.HasPrefix(se.GRPCStatus().Message(), notEtcdPrefix)
}
