package sema

import (
	"context"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
)

// A waiter's first lease grant that goes to a member that accepts connections but does not
// answer (stopped, frozen, being replaced and not joined yet) is given up after a try and
// sent again to a live member, not waited on for the whole ConnectTimeout and then taken
// for etcd unreachable (D3: 69) while two members of three answer (D7b (3)). The nemesis
// found it: conch started while its node's member was being replaced exited 69. The client
// is steered so that its next request, the grant, goes to the silent member.
func TestFirstGrantLeavesSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	g := etcdtest.StartSilentRig(t)
	g.GoSilent(t)
	s := newSem(t, g.WC, "silentgrant", 1, Options{TTL: 10 * time.Second, ConnectTimeout: 5 * time.Second})
	steerToSilent(t, g.WC)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	h, err := s.Acquire(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("acquire after %v: %v; want the slot: two members of three answer", took.Round(time.Millisecond), err)
	}
	t.Logf("slot held %v after the acquire began, its first grant sent to the silent member", took.Round(time.Millisecond))
	if took >= 4*time.Second {
		t.Errorf("slot held only %v after the acquire began: the grant waited on the silent member", took)
	}
	release(t, h)
}
