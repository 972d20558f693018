package etcdtest

import (
	"crypto/sha1"
	"encoding/binary"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
)

// StartZeroLeases is Start for a member whose lease IDs all start with the
// hex digit 0, as they do on some real clusters (where a lease spelled
// unpadded names no key). etcd derives lease IDs from the member ID:
// etcdserver's request ID generator (pkg/idutil) puts the member ID's low
// 16 bits in the ID's top 16 bits, and LeaseGrant clears the top bit; so the
// first hex digit is bits 12..14 of the member ID, and is 0 when they are.
// The member ID of a fresh single member is the first 8 bytes (big-endian)
// of SHA-1 over its sorted peer URLs joined, then the cluster token
// (membership.computeMemberID): the token is chosen until the rule holds.
// The server's real member ID is checked after the start, so a change of
// etcd's rule fails the test instead of passing it untested.
func StartZeroLeases(t testing.TB) *Server {
	t.Helper()
	s := startWith(t, func(cfg *embed.Config) {
		var urls []string
		for _, u := range cfg.AdvertisePeerUrls {
			urls = append(urls, u.String())
		}
		sort.Strings(urls)
		for i := 0; ; i++ {
			token := "etcdtest-" + strconv.Itoa(i)
			if zeroLeases(memberID(strings.Join(urls, ""), token)) {
				cfg.InitialClusterToken = token
				return
			}
		}
	})
	if id := uint64(s.etcd.Server.MemberID()); !zeroLeases(id) {
		t.Fatalf("etcdtest: member ID %016x: etcd's lease ID rule is not the one StartZeroLeases knows", id)
	}
	return s
}

func memberID(peerURLs, token string) uint64 {
	h := sha1.Sum([]byte(peerURLs + token))
	return binary.BigEndian.Uint64(h[:8])
}

// zeroLeases reports whether a member with this ID grants lease IDs whose
// first hex digit is 0.
func zeroLeases(memberID uint64) bool { return memberID&0x7000 == 0 }
