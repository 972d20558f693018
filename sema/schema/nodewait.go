package schema

import (
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NodeWaitRoot is the prefix of the markers of one-slot-per-node (Spread) processes that wait
// for their own node's key (D11): such a process has no key in the queue,
// so without a marker a listing could not show it. The marker is
// NodeWaitRoot + <name> + "/" + <max> + "/" + <node> + "/" + <lease ID>,
// bound to the waiter's lease and holding its record. It lives outside
// KeyRoot, so no acquisition ever ranks it.
const NodeWaitRoot = "/conch/v1/nodewait/"

// NodeWaitKey is the marker of a Spread waiter of node on lease id.
func NodeWaitKey(name string, max int, node string, id clientv3.LeaseID) string {
	return NodeWaitRoot + strings.TrimPrefix(Prefix(name, max), KeyRoot) + node + "/" + FormatLeaseID(int64(id))
}

// NodeWaitInfo is what ParseNodeWaitKey reads from a marker's key.
type NodeWaitInfo struct {
	Name  string // the semaphore's name segment, as stored
	Max   int    // 0 when the capacity segment is not canonical
	Node  string // the node whose key the waiter waits for
	Lease int64  // the lease the key's name spells, 0 if none
	// Sound is true when every segment parses: a valid name, a canonical
	// capacity, a valid node and a lease ID.
	Sound bool
}

// ParseNodeWaitKey reads a key from under NodeWaitRoot. It does no I/O
// and never fails: what does not parse leaves Sound false.
func ParseNodeWaitKey(key string) NodeWaitInfo {
	parts := strings.Split(strings.TrimPrefix(key, NodeWaitRoot), "/")
	var in NodeWaitInfo
	if len(parts) > 0 {
		in.Name = parts[0]
	}
	if len(parts) != 4 {
		return in
	}
	max, canon := parseCapacitySegment(parts[1])
	id, lease := ParseLeaseID(parts[3])
	in.Node, in.Lease = parts[2], id
	if canon {
		in.Max = max
	}
	in.Sound = canon && lease && ValidateName(in.Name) == nil && ValidateNode(in.Node) == nil
	return in
}
