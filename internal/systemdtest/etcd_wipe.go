package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member's data lost for good (its disk replaced), and the member replaced as etcd's
// runtime reconfiguration guide says: removed from the cluster, added again under the same
// name and peer URL, and started on an empty data directory with --initial-cluster-state
// existing, so that it receives the store from the leader. The cluster keeps its ID and its
// revisions; the member's ID is new.

// WipeMember SIGKILLs member i and deletes its data directory: the member's state is gone.
// The cluster runs on with the other two. RejoinMember replaces it.
func (c *EtcdCluster) WipeMember(ctx context.Context, i int) error {
	if err := c.KillMember(ctx, i); err != nil {
		return err
	}
	if _, err := c.nodes[i].Nsenter(ctx, "rm", "-rf", etcdDataDir); err != nil {
		return fmt.Errorf("cannot wipe etcd member %d's data: %w", i, err)
	}
	return nil
}

// RejoinMember replaces member i, wiped by WipeMember: it removes the old member through the
// others, adds a member with i's peer URL, and starts it (state existing, empty data). Each
// change needs the others' quorum; it is tried again every 200 ms until ctx ends (another
// member may be down or cut off meanwhile). It returns once systemd started the member.
func (c *EtcdCluster) RejoinMember(ctx context.Context, i int) error {
	peer := c.peerURL(i)
	var old uint64
	var last error
	try := func(what string, f func(context.Context, *clientv3.Client) (bool, error)) error {
		for {
			for j := range c.nodes {
				if j == i {
					continue
				}
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				done, err := f(rctx, c.memberClient(j))
				cancel()
				if done {
					return nil
				}
				last = err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cannot %s etcd member %d: %w", what, i, errors.Join(ctx.Err(), last))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	// The member of i's peer URL now, if any: the old one until it is removed, then the new one.
	member := func(ctx context.Context, cli *clientv3.Client) (uint64, error) {
		resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
		if err != nil {
			return 0, err
		}
		for _, m := range resp.Members {
			if slices.Contains(m.PeerURLs, peer) {
				return m.ID, nil
			}
		}
		return 0, nil
	}
	if err := try("find", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		id, err := member(ctx, cli)
		old = id
		return err == nil, err
	}); err != nil {
		return err
	}
	if old != 0 {
		if err := try("remove", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
			_, err := cli.MemberRemove(ctx, old)
			return err == nil || errors.Is(err, rpctypes.ErrMemberNotFound), err
		}); err != nil {
			return err
		}
	}
	if err := try("add", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		_, err := cli.MemberAdd(ctx, []string{peer})
		if errors.Is(err, rpctypes.ErrPeerURLExist) { // an earlier try's answer was lost
			id, lerr := member(ctx, cli)
			return lerr == nil && id != 0 && id != old, err
		}
		return err == nil, err
	}); err != nil {
		return err
	}
	c.mu.Lock()
	if c.joined == nil {
		c.joined = map[int]bool{}
	}
	c.joined[i] = true
	c.mu.Unlock()
	return c.StartMember(ctx, i)
}
