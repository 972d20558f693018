package who

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"
)

// followListing, whose watches sit on a member that stops answering (its connection open), shows a
// change made through another member within about a second, and says nothing of it: a
// member's failure while the others keep quorum is not etcd lost. Same set-up as
// sema's TestHeadLeavesSilentMember. Without the stream check the change waits for gRPC's keep-alive
// (13 s); without the probe's and the read's second tries, a try that meets the silent member
// reports etcd lost.
func TestFollowLeavesSilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	g := etcdtest.StartSilentRig(t)
	type seen struct {
		rev int64
		at  time.Time
	}
	listings := make(chan seen, 64)
	var lost atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- followListing(ctx, g.WC, "silentf", followHandler{
			Listing: func(l Listing) error { listings <- seen{l.Rev, time.Now()}; return nil },
			Note: func(n Note) {
				if n.Kind == NoteLost {
					lost.Add(1)
				}
			},
		})
	}()
	defer func() { cancel(); <-done }()
	<-listings // the first read
	g.Watchers(t, 3, "the follower's three watches")
	g.GoSilent(t)
	start := time.Now()
	resp, err := g.Admin.Put(t.Context(), schema.Prefix("silentf", 1)+"hand-written", "x")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * sematest.Timeout)
	for {
		select {
		case s := <-listings:
			if s.rev < resp.Header.Revision {
				continue
			}
			elapsed := s.at.Sub(start)
			t.Logf("the change was shown %v after the put, its watches' member silent", elapsed.Round(time.Millisecond))
			// each new stream may land on the silent member again (the round robin), a
			// second behind each time: a bound between that and gRPC's 13 s
			if elapsed >= 9*time.Second {
				t.Fatalf("the change was shown %v after the put: the watches stayed on the silent member", elapsed)
			}
			if n := lost.Load(); n > 0 {
				t.Errorf("followListing reported etcd lost %d times; one silent member of three is not etcd lost", n)
			}
			return
		case <-deadline:
			t.Fatal("the change was never shown")
		}
	}
}

// The summary and the count of keys conch did not write, beside pause keys as stored: a
// value that is not a pause record still pauses its semaphore (D16), and a pause key whose
// name names no semaphore is in none (D6g).
func TestSummarizePauses(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	if _, err := c.Put(t.Context(), schema.PauseKey("pg", 1), "\x00garbage{"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(t.Context(), schema.PauseRoot+"p\"g/01", `{"who":"x@y"}`); err != nil {
		t.Fatal(err)
	}
	l, err := snapshot(t.Context(), c, "")
	if err != nil || len(l.Pauses) != 2 || l.Pauses[0].Max != 1 || l.Pauses[0].Err == nil || l.Pauses[1].Max != 0 || l.Pauses[1].Who != "x@y" {
		t.Fatalf("snapshot: %+v %v", l.Pauses, err)
	}
	if sums, foreign := summarize(l), foreignKeys(l); len(sums) != 1 || !sums[0].Paused || foreign["p\"g"] != 1 {
		t.Fatalf("summarize %+v, foreignKeys %v: want pg[1] paused, the other key foreign", sums, foreign)
	}
}
