package fleetlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/conch-project/conch/sema/schema"
)

// The two operations of the protocol, by the path's last segments.
const (
	// APIPreReboot asks for a reboot slot (the protocol's RecursiveLock).
	APIPreReboot = "pre-reboot"
	// APISteadyState gives it back (UnlockIfHeld).
	APISteadyState = "steady-state"
)

// ProtocolHeader must be "true" on every protocol request.
const ProtocolHeader = "fleet-lock-protocol"

// MaxBody bounds a request's body: a real one is about 80 bytes.
const MaxBody = 64 << 10

// Kind is the "kind" of an error body: a small fixed set, since clients count it in a
// metric label and log the value (D19).
type Kind string

// The error kinds, each with the status it goes with (Status).
const (
	KindMissingHeader      Kind = "missing_header"             // 400: no "fleet-lock-protocol: true"
	KindInvalidRequest     Kind = "invalid_request"            // 400: the body is not the schema, or the id breaks the node rule
	KindUnknownGroup       Kind = "unknown_group"              // 400: a group this server does not serve
	KindNotFound           Kind = "not_found"                  // 404: no such path
	KindMethodNotAllowed   Kind = "method_not_allowed"         // 405: not POST (not GET for /metrics, /healthz)
	KindRequestTooLarge    Kind = "request_too_large"          // 413: a body over MaxBody
	KindSemaphoreFull      Kind = "failed_lock_semaphore_full" // 423: every slot is taken
	KindPaused             Kind = "failed_lock_paused"         // 423: the group's semaphore is paused (D16)
	KindOtherCapacity      Kind = "failed_lock_other_capacity" // 423: the group's name is live under another capacity (D17)
	KindBackendError       Kind = "backend_error"              // 500: etcd refused for good (auth, permission)
	KindBackendUnavailable Kind = "backend_unavailable"        // 503: etcd did not answer in time; Retry-After
)

// Status is the HTTP status that goes with kind k.
func (k Kind) Status() int {
	switch k {
	case KindMissingHeader, KindInvalidRequest, KindUnknownGroup:
		return http.StatusBadRequest
	case KindNotFound:
		return http.StatusNotFound
	case KindMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case KindRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case KindSemaphoreFull, KindPaused, KindOtherCapacity:
		return http.StatusLocked
	case KindBackendUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Kinds lists every kind, for the request counters.
var Kinds = []Kind{KindMissingHeader, KindInvalidRequest, KindUnknownGroup, KindNotFound,
	KindMethodNotAllowed, KindRequestTooLarge, KindSemaphoreFull, KindPaused, KindOtherCapacity, KindBackendError, KindBackendUnavailable}

// Refusal is a refused request: the protocol's error body {"kind": K, "value": V}, both
// non-empty.
type Refusal struct {
	Kind  Kind   `json:"kind"`
	Value string `json:"value"`
}

func (r *Refusal) Error() string { return string(r.Kind) + ": " + r.Value }

func refuse(k Kind, format string, args ...any) *Refusal {
	return &Refusal{Kind: k, Value: fmt.Sprintf(format, args...)}
}

// Request is a protocol request's body.
type Request struct {
	ClientParams *ClientParams `json:"client_params"`
}

// ClientParams names the node (ID) and its group.
type ClientParams struct {
	ID    *string `json:"id"`
	Group *string `json:"group"`
}

// groupRule is the protocol's rule for a group name.
var groupRule = regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)

// ValidGroup returns nil if name may name a served group: the protocol's rule
// ^[a-zA-Z0-9.-]+$ and the semaphore name rule (D4), else an error saying which.
func ValidGroup(name string) error {
	if !groupRule.MatchString(name) {
		return fmt.Errorf("group %q: a FleetLock group matches ^[a-zA-Z0-9.-]+$", name)
	}
	if err := schema.ValidateName(name); err != nil {
		return fmt.Errorf("group %q: %w", name, err)
	}
	return nil
}

// idRule is what an accepted id must be (D19: conch's node-name rule, D11a), as said to
// the client that breaks it.
const idRule = "an id must be a conch node name: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, and not 16 lower-case hex digits, " +
	"so that the operator's release of that node can name it"

// parseBody reads a protocol request's body from r (at most MaxBody) and returns the id and
// group. Errors are Refusals: KindRequestTooLarge, KindInvalidRequest (saying what is
// wrong: not JSON, not an object, a field missing, empty or not a string, a group or an id
// breaking its rule, data after the object).
func parseBody(r io.Reader) (id, group string, _ *Refusal) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", "", refuse(KindRequestTooLarge, "the body is larger than %d bytes", MaxBody)
		}
		return "", "", refuse(KindInvalidRequest, "the body could not be read: %v", err)
	}
	if len(b) > MaxBody {
		return "", "", refuse(KindRequestTooLarge, "the body is larger than %d bytes", MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var req Request
	if err := dec.Decode(&req); err != nil {
		return "", "", refuse(KindInvalidRequest, "the body is not the JSON object {\"client_params\": {\"id\": ID, \"group\": GROUP}}: %s", jsonProblem(err))
	}
	if dec.More() {
		return "", "", refuse(KindInvalidRequest, "the body has data after its JSON object")
	}
	switch p := req.ClientParams; {
	case p == nil:
		return "", "", refuse(KindInvalidRequest, "client_params is missing")
	case p.ID == nil || *p.ID == "":
		return "", "", refuse(KindInvalidRequest, "client_params.id is missing or empty")
	case p.Group == nil || *p.Group == "":
		return "", "", refuse(KindInvalidRequest, "client_params.group is missing or empty")
	case !groupRule.MatchString(*p.Group):
		return "", "", refuse(KindInvalidRequest, "client_params.group %s: must match ^[a-zA-Z0-9.-]+$", quote(*p.Group))
	case schema.ValidateNode(*p.ID) != nil:
		return "", "", refuse(KindInvalidRequest, "client_params.id %s is not accepted: %s", quote(*p.ID), idRule)
	}
	return *req.ClientParams.ID, *req.ClientParams.Group, nil
}

// jsonProblem says what encoding/json found, without Go type names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("%s is a JSON %s, not the expected type", field, te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "the body is empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// quote is s quoted for an error value, cut to 140 bytes (an id is hostile input).
func quote(s string) string {
	if len(s) > 140 {
		s = s[:140] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// writeRefusal writes ref as the protocol's JSON error body, with its status.
func writeRefusal(w http.ResponseWriter, ref *Refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ref.Kind == KindBackendUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(ref.Kind.Status())
	b, _ := json.Marshal(ref) // strings only: cannot fail
	_, _ = w.Write(append(b, '\n'))
}

// retryAfter is Retry-After's seconds on a 503: a client that honours it tries again soon
// (zincati waits its own 300 s).
const retryAfter = "10"
