package fleetlock

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"
)

// Zincati-like ids: 32 lower-case hex digits (an app-specific machine id).
const (
	idA = "0b6e4cfc2a7d4e0f9a1f3b5c7d9e1f20"
	idB = "1c7f5d0d3b8e5f1a0b2a4c6d8e0f2a31"
	idC = "2d806e1e4c9f6a2b1c3b5d7e9f1a3b42"
)

// TestConformance walks the protocol (D19) against a real server on a real etcd, row by
// row, in order: each row's request, the status and kind it must get, and what etcd must
// hold after it. Group "default" has capacity 2, "solo" 1 (paused in its rows); "other"
// is not served.
func TestConformance(t *testing.T) {
	t.Parallel()
	_, c := sematest.StartEtcd(t)
	s := serve(t, c, map[string]int{"default": 2, "solo": 1}, time.Hour)
	hc := newClient(s.base, zincati, "", "").hc
	post := func(path, body string) func() (reply, error) {
		return func() (reply, error) {
			return rawPost(hc, s.base+path, map[string]string{ProtocolHeader: "true"}, body)
		}
	}
	body := func(id, group string) string {
		return `{"client_params":{"id":"` + id + `","group":"` + group + `"}}`
	}
	zin := func(id, group string) *fleetClient { return newClient(s.base+"/", zincati, id, group) }
	flat := func(id, group string) *fleetClient { return newClient(s.base+"/", flatcar, id, group) }
	flatNoSlash := func(id, group string) *fleetClient { return newClient(s.base, flatcar, id, group) }
	prefixed := func(id, group string) *fleetClient { return newClient(s.base+"/fleet/", zincati, id, group) }
	var firstA fleet.Holding
	rows := []struct {
		name   string
		req    func() (reply, error)
		status int
		kind   Kind
		value  string   // a part the error's value must contain
		after  []string // the nodes holding default[2] after the row, in create order
		check  func(t *testing.T, r reply)
	}{
		{name: "lock, zincati base ending in /", req: zin(idA, "default").lock, status: 200, after: []string{idA},
			check: func(t *testing.T, _ reply) {
				firstA = holders(t, c, "default", 2)[0]
				if !firstA.HeldAfter || firstA.Via != schema.ViaFleetLock || firstA.Until.IsZero() {
					t.Errorf("the slot's record is %+v, want held-after via fleetlock with its until", firstA)
				}
			}},
		{name: "recursive lock by the holder: granted, nothing written", req: zin(idA, "default").lock, status: 200, after: []string{idA},
			check: func(t *testing.T, _ reply) {
				if h := holders(t, c, "default", 2)[0]; h.Key != firstA.Key || h.Rev != firstA.Rev || h.Until != firstA.Until {
					t.Errorf("the holder's key changed: %+v, was %+v (the hold must not restart)", h, firstA)
				}
			}},
		{name: "lock, Flatcar base ending in / (//v1/pre-reboot, no redirect)", req: flat(idB, "default").lock, status: 200, after: []string{idA, idB}},
		{name: "lock by a third id at capacity 2: full, naming the holders", req: flatNoSlash(idC, "default").lock, status: 423, kind: KindSemaphoreFull, value: idA, after: []string{idA, idB}},
		{name: "unlock by a non-holder: granted, nothing freed", req: zin(idC, "default").unlock, status: 200, after: []string{idA, idB}},
		{name: "unbalanced unlock by an id never seen", req: flat("never-seen-node", "default").unlock, status: 200, after: []string{idA, idB}},
		{name: "unlock by the holder frees its slot", req: zin(idA, "default").unlock, status: 200, after: []string{idB}},
		{name: "unlock again: granted, nothing to free", req: zin(idA, "default").unlock, status: 200, after: []string{idB}},
		{name: "the freed slot goes to the next poller, base with a path prefix", req: prefixed(idC, "default").lock, status: 200, after: []string{idB, idC}},
		{name: "a group not served", req: zin(idA, "other").lock, status: 400, kind: KindUnknownGroup, value: "default, solo", after: []string{idB, idC}},
		{name: "a group not served, unlock", req: zin(idA, "other").unlock, status: 400, kind: KindUnknownGroup, after: []string{idB, idC}},
		{name: "a paused group", req: func() (reply, error) {
			if _, _, err := fleet.SetPause(context.Background(), c, "solo", 1, "ops@node1", "kernel freeze"); err != nil {
				return reply{}, err
			}
			return zin(idA, "solo").lock()
		}, status: 423, kind: KindPaused, value: "kernel freeze", after: []string{idB, idC}},
		{name: "unlock in a paused group is granted", req: zin(idA, "solo").unlock, status: 200, after: []string{idB, idC}},
		{name: "GET: 405 with Allow: POST", req: func() (reply, error) {
			return rawDo(hc, http.MethodGet, s.base+"/v1/pre-reboot", map[string]string{ProtocolHeader: "true"}, "")
		}, status: 405, kind: KindMethodNotAllowed, after: []string{idB, idC},
			check: func(t *testing.T, r reply) {
				if a := r.header.Get("Allow"); a != "POST" {
					t.Errorf("Allow: %q, want POST", a)
				}
			}},
		{name: "no protocol header", req: func() (reply, error) {
			return rawPost(hc, s.base+"/v1/pre-reboot", nil, body(idA, "default"))
		}, status: 400, kind: KindMissingHeader, after: []string{idB, idC}},
		{name: "protocol header false", req: func() (reply, error) {
			return rawPost(hc, s.base+"/v1/steady-state", map[string]string{ProtocolHeader: "false"}, body(idB, "default"))
		}, status: 400, kind: KindMissingHeader, after: []string{idB, idC}},
		{name: "body not JSON", req: post("/v1/pre-reboot", "id=a"), status: 400, kind: KindInvalidRequest, after: []string{idB, idC}},
		{name: "empty body", req: post("/v1/pre-reboot", ""), status: 400, kind: KindInvalidRequest, value: "empty", after: []string{idB, idC}},
		{name: "no client_params", req: post("/v1/pre-reboot", `{"id":"a","group":"default"}`), status: 400, kind: KindInvalidRequest, value: "client_params", after: []string{idB, idC}},
		{name: "id missing", req: post("/v1/pre-reboot", `{"client_params":{"group":"default"}}`), status: 400, kind: KindInvalidRequest, value: "id", after: []string{idB, idC}},
		{name: "id empty", req: post("/v1/pre-reboot", body("", "default")), status: 400, kind: KindInvalidRequest, value: "id", after: []string{idB, idC}},
		{name: "id not a string", req: post("/v1/pre-reboot", `{"client_params":{"id":7,"group":"default"}}`), status: 400, kind: KindInvalidRequest, after: []string{idB, idC}},
		{name: "group empty", req: post("/v1/pre-reboot", body(idA, "")), status: 400, kind: KindInvalidRequest, value: "group", after: []string{idB, idC}},
		{name: "group breaks ^[a-zA-Z0-9.-]+$", req: post("/v1/pre-reboot", body(idA, "de_fault")), status: 400, kind: KindInvalidRequest, value: "group", after: []string{idB, idC}},
		{name: "id that is no node name (a slash)", req: post("/v1/pre-reboot", body("a/b", "default")), status: 400, kind: KindInvalidRequest, value: "node name", after: []string{idB, idC}},
		{name: "id of 16 lower-case hex digits (reads as a lease key)", req: post("/v1/pre-reboot", body("0123456789abcdef", "default")), status: 400, kind: KindInvalidRequest, value: "16 lower-case hex", after: []string{idB, idC}},
		{name: "data after the object", req: post("/v1/pre-reboot", body(idA, "default")+"{}"), status: 400, kind: KindInvalidRequest, after: []string{idB, idC}},
		{name: "body over 64 KiB", req: post("/v1/pre-reboot", `{"client_params":{"id":"`+strings.Repeat("a", MaxBody)+`","group":"default"}}`), status: 413, kind: KindRequestTooLarge, after: []string{idB, idC}},
		{name: "unknown path", req: post("/v2/pre-reboot", body(idA, "default")), status: 404, kind: KindNotFound, after: []string{idB, idC}},
		{name: "a path past the operation", req: post("/v1/pre-reboot/x", body(idA, "default")), status: 404, kind: KindNotFound, after: []string{idB, idC}},
		{name: "healthz", req: func() (reply, error) { return rawDo(hc, http.MethodGet, s.base+"/healthz", nil, "") }, status: 200, after: []string{idB, idC}},
		{name: "metrics: gauges of the served groups and the counters", req: func() (reply, error) {
			return rawDo(hc, http.MethodGet, s.base+"//metrics", nil, "")
		}, status: 200, after: []string{idB, idC}, check: func(t *testing.T, r reply) {
			for _, want := range []string{`conch_sema_holders{name="default",max="2"} 2`, `conch_sema_paused{name="solo",max="1"} 1`,
				`conch_fleetlock_requests_total{api="pre-reboot",result="granted"} 3`,
				`conch_fleetlock_requests_total{api="pre-reboot",result="failed_lock_semaphore_full"} 1`} {
				if !strings.Contains(r.body, want) {
					t.Errorf("/metrics lacks %q:\n%s", want, r.body)
				}
			}
		}},
		{name: "POST /metrics: 405", req: post("/metrics", ""), status: 405, kind: KindMethodNotAllowed, after: []string{idB, idC}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r, err := row.req()
			if err != nil {
				t.Fatal(err)
			}
			if r.status != row.status || r.kind != row.kind {
				t.Fatalf("got %d %q (%s), want %d %q", r.status, r.kind, r.value, row.status, row.kind)
			}
			if !r.ok() && (r.value == "" || r.header.Get("Content-Type") != "application/json") {
				t.Errorf("error body %q with Content-Type %q: want a non-empty value, application/json", r.body, r.header.Get("Content-Type"))
			}
			if !strings.Contains(r.value, row.value) {
				t.Errorf("value %q does not name %q", r.value, row.value)
			}
			if got := nodes(holders(t, c, "default", 2)); !slices.Equal(got, row.after) {
				t.Errorf("default[2] held by %q, want %q", got, row.after)
			}
			if row.check != nil {
				row.check(t, r)
			}
			t.Logf("%d %s %s", r.status, r.kind, r.value)
		})
	}
}
