package slotrun

import (
	"slices"
	"testing"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// notes is a Reporter that keeps the notes it is told (pure logic: no etcd, no child).
type notes struct{ got []Note }

func (n *notes) Event(sema.Event)              {}
func (n *notes) Started(int, string)           {}
func (n *notes) Stopping(error)                {}
func (n *notes) Released(int, time.Duration)   {}
func (n *notes) HeldAfter(sema.HeldAfter, int) {}
func (n *notes) Skipped(sema.OnceMarker)       {}
func (n *notes) Note(note Note)                { n.got = append(n.got, note) }

// kinds are the kinds of the notes told, in order.
func (n *notes) kinds() (k []NoteKind) {
	for _, note := range n.got {
		k = append(k, note.Kind)
	}
	return k
}

// The lease check looks once at the TTL etcd granted (D4, D7): a TTL raised above the one
// asked is noted, a lease too short to fence the stop grace in time is warned about, and a
// later event says nothing again.
func TestLeaseCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		asked   time.Duration
		granted time.Duration
		grace   time.Duration
		want    []NoteKind
	}{
		{"fits", 10 * time.Second, 10 * time.Second, time.Second, nil},
		{"raised", time.Second, 2 * time.Second, 100 * time.Millisecond, []NoteKind{LeaseGranted}},
		{"too short", 5 * time.Second, 5 * time.Second, 30 * time.Second, []NoteKind{ShortLease}},
		{"raised and too short", time.Second, 2 * time.Second, 30 * time.Second, []NoteKind{LeaseGranted, ShortLease}},
	} {
		rep := &notes{}
		plan := startPlanning(t.Context(), unitrun.Options{Mode: unitrun.ScopeNever, KillAfter: tc.grace})
		t.Cleanup(plan.close)
		r := &run{cfg: Config{TTL: tc.asked}, rep: rep, planning: plan}
		check := r.leaseCheck()
		check(sema.Event{Kind: sema.Waiting}) // no TTL yet: nothing
		check(sema.Event{Kind: sema.Enqueued, TTL: tc.granted})
		check(sema.Event{Kind: sema.Held, TTL: tc.granted})
		if got := rep.kinds(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: notes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// MinTTL is the smallest TTL that fences a grace in time, and MaxKillAfter the longest grace
// a TTL fences in time (D7): each answers the other.
func TestTTLBounds(t *testing.T) {
	for _, ka := range []time.Duration{0, 100 * time.Millisecond, time.Second, 5 * time.Second, 90 * time.Second} {
		ttl := MinTTL(ka)
		if sema.FenceTooLate(ttl, ka) || (ttl > time.Second && !sema.FenceTooLate(ttl-time.Second, ka) && ka > 0) {
			t.Errorf("MinTTL(%v) = %v: not the smallest TTL that fences in time", ka, ttl)
		}
		if k := MaxKillAfter(ttl); k < ka-ka%(100*time.Millisecond) {
			t.Errorf("MaxKillAfter(MinTTL(%v) = %v) = %v, less than the grace", ka, ttl, k)
		}
	}
}
