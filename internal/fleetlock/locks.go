package fleetlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// Results of granted requests, for the counters (refusals count by their kind).
const (
	resultGranted     = "granted"      // pre-reboot: a slot was taken
	resultAlreadyHeld = "already_held" // pre-reboot: the id held one already
	resultReleased    = "released"     // steady-state: the id's slot was freed
	resultNotHeld     = "not_held"     // steady-state: the id held none
)

// lock is pre-reboot for id in group (semaphore group[max]): fleet.TakeHeld, whose one Txn
// checks and writes (D19). A slot the id already holds is granted again, untouched: its
// hold is not restarted (the hold bounds the reboot from the first grant).
func (s *Server) lock(ctx context.Context, group string, max int, id string) (string, *Refusal) {
	var t fleet.Take
	var err error
	if s.cfg.Queue > 0 {
		t, err = fleet.TakeHeldQueued(ctx, s.cfg.Client, group, max, id, s.cfg.Hold, s.cfg.Queue, s.cfg.Record)
	} else {
		t, err = fleet.TakeHeld(ctx, s.cfg.Client, group, max, id, s.cfg.Hold, s.cfg.Record)
	}
	if err != nil {
		return "", backendRefusal(group, max, err)
	}
	switch t.Result {
	case fleet.TakeGranted:
		s.event(Event{Granted: true, Group: group, Max: max, ID: id, Slot: t.Slot})
		return resultGranted, nil
	case fleet.TakeAlreadyHeld:
		return resultAlreadyHeld, nil
	case fleet.TakeOtherCapacity:
		return "", refuse(KindOtherCapacity, "group %s[max=%d]: %s is live with %s, a separate semaphore: no reboot while its slots are in use; serve the group with that capacity",
			group, max, group, sema.CapacityList(t.Capacities))
	case fleet.TakePaused:
		return "", refuse(KindPaused, "group %s[max=%d] is %s%s", group, max, t.Pause.String(), s.placeText(t))
	}
	return "", refuse(KindSemaphoreFull, "group %s[max=%d]: every slot is taken: %s%s", group, max, holdersText(t), s.placeText(t))
}

// unlock is steady-state for id in group: D14's release of the id's slots held after a run
// (never a running job's key, never another node's), granted whether it freed one or none.
func (s *Server) unlock(ctx context.Context, group string, max int, id string) (string, *Refusal) {
	rel, err := fleet.ReleaseHeld(ctx, s.cfg.Client, group, max, id)
	if err == nil && s.cfg.Queue > 0 { // a node that is up no longer waits (D19a)
		_, err = fleet.DropQueued(ctx, s.cfg.Client, group, max, id)
	}
	for _, ha := range rel.Freed {
		s.event(Event{Group: group, Max: max, ID: id, Slot: ha})
	}
	if err != nil {
		return "", backendRefusal(group, max, err)
	}
	if len(rel.Freed) == 0 {
		return resultNotHeld, nil
	}
	return resultReleased, nil
}

// placeText says, with a queue, where the refused node's place is.
func (s *Server) placeText(t fleet.Take) string {
	if s.cfg.Queue <= 0 || t.Contended {
		return ""
	}
	return fmt.Sprintf("; this node's place is kept for %v after each request, %d ahead", s.cfg.Queue, t.Ahead)
}

func (s *Server) event(e Event) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

// backendRefusal maps sema's error: etcd refused for good is backend_error, anything else
// (no answer in time) backend_unavailable.
func backendRefusal(group string, max int, err error) *Refusal {
	if errors.Is(err, sema.ErrRefused) {
		return refuse(KindBackendError, "group %s[max=%d]: etcd refused the request: %v", group, max, err)
	}
	return refuse(KindBackendUnavailable, "group %s[max=%d]: etcd did not answer in time; try again", group, max)
}

// holdersText names who holds the slots of a full group: id (or node), since, until, and
// the count of waiters (held-after records are hostile input: quoted).
func holdersText(t fleet.Take) string {
	if t.Contended {
		return "slots were free, but other nodes took each first; try again"
	}
	var parts []string
	for _, h := range t.Holders {
		p := fmt.Sprintf("%s since %s", quote(h.Node), timeText(h.Since))
		switch {
		case h.HeldAfter && h.Via == schema.ViaFleetLock:
			p += fmt.Sprintf(" until %s (reboot)", timeText(h.Until))
		case h.HeldAfter:
			p += fmt.Sprintf(" until %s (kept after a run)", timeText(h.Until))
		case h.Queued:
			p += " (its turn: kept until it asks again)"
		default:
			p += " (a running job)"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, "; ")
	if t.Waiters > 0 {
		s += fmt.Sprintf("; %d waiting", t.Waiters)
	}
	return s
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}
