package etcdconn

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// notEtcd rewrites only grpc-go's "answered with plain HTTP" errors, keeping their code.
func TestNotEtcdRewrite(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want string // "" for unchanged
	}{
		{status.Error(codes.Unimplemented, "unexpected HTTP status code received from server: 404 (Not Found); transport: received unexpected content-type \"text/plain\"\ndata: \"secret page\""),
			"not an etcd: it answered HTTP 404 (Not Found) where etcd's gRPC was expected"},
		{status.Error(codes.Unknown, "malformed header: missing HTTP content-type; transport: received unexpected content-type \"text/html\""), "not an etcd: it answered HTTP, but not gRPC"},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp: connect: connection refused\""), ""},
		{errors.New("unexpected HTTP status code received from server: 404 (Not Found)"), ""}, // not a gRPC status
		{nil, ""},
	} {
		got := notEtcd(tc.in)
		if tc.want == "" {
			if got != tc.in || IsNotEtcd(got) {
				t.Errorf("notEtcd(%v) = %v, want it unchanged", tc.in, got)
			}
			continue
		}
		if status.Code(got) != status.Code(tc.in) || !strings.Contains(got.Error(), tc.want) || strings.Contains(got.Error(), "data:") || !IsNotEtcd(fmt.Errorf("wrapped: %w", got)) {
			t.Errorf("notEtcd(%v) = %v (code %v), want code %v and %q", tc.in, got, status.Code(got), status.Code(tc.in), tc.want)
		}
	}
}
