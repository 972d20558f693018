package etcdconn

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestWarmSamplesRoundTrip checks that every warm-up sample is a message that marshals and
// unmarshals to itself, so that WarmProtobuf reaches its encoder and decoder, and
// that the samples cover the requests and answers of a run.
func TestWarmSamplesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range warmSamples() {
		name := string(m.ProtoReflect().Descriptor().FullName())
		seen[name] = true
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(m, back) {
			t.Errorf("%s: round trip changed the message: %v, then %v", name, m, back)
		}
	}
	for _, want := range []string{"LeaseGrantRequest", "LeaseGrantResponse", "TxnRequest", "TxnResponse", "WatchRequest",
		"WatchResponse", "LeaseKeepAliveRequest", "LeaseKeepAliveResponse", "LeaseRevokeRequest", "LeaseRevokeResponse"} {
		if !seen["etcdserverpb."+want] {
			t.Errorf("no warm-up sample of etcdserverpb.%s", want)
		}
	}
}
