package schema

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Records are hostile input; older and newer formats are read, a
// bad field does not hide the others, nothing is refused silently.
func TestDecodeRecord(t *testing.T) {
	since := time.Date(2026, 6, 12, 10, 15, 0, 0, time.UTC)
	cur := Record{Version: 1, Host: "node2", PID: 4242, Since: since, Unit: "a.service", Scope: true}
	for _, c := range []struct {
		name, in       string
		host           string
		pid            int
		missing, bad   []string
		newer, readErr bool
	}{
		{name: "current", in: cur.Encode(), host: "node2", pid: 4242},
		{name: "older without version", in: `{"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`, host: "n", pid: 1, missing: []string{"v"}},
		{name: "newer with unknown fields", in: `{"v":2,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z","cmd_hash":"x","nested":{"a":[1]}}`, host: "n", pid: 1, newer: true},
		{name: "empty object", in: `{}`, missing: []string{"v", "host", "pid", "since"}},
		{name: "wrong types", in: `{"v":"1","host":7,"pid":"42","since":12,"scope":"yes"}`, bad: []string{"v", "host", "pid", "since", "scope"}},
		{name: "pid out of range", in: `{"v":1,"host":"n","pid":-5,"since":"2026-06-12T10:15:00Z"}`, host: "n", bad: []string{"pid"}},
		{name: "pid overflow", in: `{"v":1,"host":"n","pid":1e30,"since":"2026-06-12T10:15:00Z"}`, host: "n", bad: []string{"pid"}},
		{name: "time not re-encodable", in: `{"v":1,"host":"n","pid":1,"since":"0000-01-01T00:00:00+01:00"}`, host: "n", pid: 1, bad: []string{"since"}},
		{name: "held_since bad", in: `{"v":1,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z","held_since":"yesterday"}`, host: "n", pid: 1, bad: []string{"held_since"}},
		{name: "null required", in: `{"v":1,"host":null,"pid":1,"since":"2026-06-12T10:15:00Z","unit":null}`, pid: 1, bad: []string{"host"}},
		{name: "version zero", in: `{"v":0,"host":"n","pid":1,"since":"2026-06-12T10:15:00Z"}`, host: "n", pid: 1, bad: []string{"v"}},
		{name: "control characters kept for the renderer", in: `{"v":1,"host":"a\nb[1/1] HELD \u001b[2J","pid":1,"since":"2026-06-12T10:15:00Z"}`, host: "a\nb[1/1] HELD \x1b[2J", pid: 1},
		{name: "not JSON", in: `{bad json`, readErr: true},
		{name: "array", in: `[1,2]`, readErr: true},
		{name: "null", in: `null`, readErr: true},
		{name: "empty value", in: ``, readErr: true},
		{name: "too large", in: `{"host":"` + strings.Repeat("a", maxRecordBytes) + `"}`, readErr: true},
	} {
		r := DecodeRecord([]byte(c.in))
		if (r.Err != nil) != c.readErr || r.Host != c.host || r.PID != c.pid || r.Newer != c.newer ||
			!slices.Equal(r.Missing, c.missing) || !slices.Equal(r.Bad, c.bad) {
			t.Errorf("%s: DecodeRecord = %+v (err %v)", c.name, r, r.Err)
		}
	}
	r := DecodeRecord([]byte(cur.Encode()))
	if !r.Since.Equal(since) || r.Unit != "a.service" || !r.Scope || r.Version != 1 {
		t.Errorf("current record read back as %+v", r)
	}
}
