package etcdconn

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// The etcd API's messages are protobuf-go messages, whose encoder and decoder tables are
// built by reflection the first time each message type is marshalled or unmarshalled: about
// 1 ms of CPU here for the types one run sends and receives, which would otherwise fall on
// the run's critical path, inside its first LeaseGrant, enqueue Txn, Watch and LeaseRevoke
// (bench/analysis.md). WarmProtobuf builds them ahead, on another goroutine, while
// conch parses its flags and the guardian and the TCP connection start. The tables are the
// same either way (protobuf-go builds each once per process, under a sync.Once), so this
// changes when the work is done, never what is sent.

// warmSamples returns one message of each type a run's etcd traffic uses (sema: enqueue and
// re-rank Txns, watches, keep-alives, the clean release), with the nested messages set, so
// that marshalling and unmarshalling them reaches every table.
func warmSamples() []proto.Message {
	kv := &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 1, ModRevision: 1, Version: 1, Lease: 1}
	h := &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: 1, RaftTerm: 1}
	rng := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), Limit: 1, SortOrder: pb.RangeRequest_ASCEND,
		SortTarget: pb.RangeRequest_CREATE, KeysOnly: true, CountOnly: true, MaxCreateRevision: 1}
	return []proto.Message{
		&pb.LeaseGrantRequest{TTL: 10}, &pb.LeaseGrantResponse{Header: h, ID: 1, TTL: 10},
		&pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_CREATE, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 1}}},
			Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: 1}}},
				{Request: &pb.RequestOp_RequestRange{RequestRange: rng}},
				{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}},
			},
		},
		&pb.TxnResponse{Header: h, Succeeded: true, Responses: []*pb.ResponseOp{
			{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: h}}},
			{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Header: h, Kvs: []*mvccpb.KeyValue{kv}, Count: 1}}},
			{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Header: h, Deleted: 1}}},
		}},
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("k"), StartRevision: 1, ProgressNotify: true, PrevKv: true, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}}}},
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 1}}},
		&pb.WatchResponse{Header: h, WatchId: 1, Created: true, Events: []*mvccpb.Event{{Type: mvccpb.Event_DELETE, Kv: kv, PrevKv: kv}}},
		&pb.LeaseKeepAliveRequest{ID: 1}, &pb.LeaseKeepAliveResponse{Header: h, ID: 1, TTL: 10},
		&pb.LeaseRevokeRequest{ID: 1}, &pb.LeaseRevokeResponse{Header: h},
	}
}

// WarmProtobuf marshals and unmarshals each of warmSamples once, which builds their tables
// (see above); conch's main starts it on a goroutine of its own. It returns nothing: a
// failure here would show again, and be handled, in the real request.
func WarmProtobuf() {
	for _, m := range warmSamples() {
		b, err := proto.Marshal(m)
		if err == nil {
			_ = proto.Unmarshal(b, m.ProtoReflect().New().Interface())
		}
	}
}
