package fleet

import (
	"errors"
	"strings"
	"testing"

	"github.com/conch-project/conch/sema/schema"
)

// SlotFromEnv: nothing set is ErrNoSlotEnv; a full slot reads back; each bad variable is
// named; Of matches a name and a capacity, either left open.
func TestSlotFromEnv(t *testing.T) {
	good := map[string]string{EnvName: "job", EnvMax: "2", EnvLease: schema.FormatLeaseID(0x1f), EnvRev: "42"}
	env := func(m map[string]string, k, v string) func(string) string {
		return func(key string) string {
			if key == k {
				return v
			}
			return m[key]
		}
	}
	if _, err := SlotFromEnv(env(nil, "", "")); !errors.Is(err, ErrNoSlotEnv) {
		t.Errorf("empty environment: %v, want ErrNoSlotEnv", err)
	}
	s, err := SlotFromEnv(env(good, "", ""))
	if err != nil || s != (Slot{Name: "job", Max: 2, Lease: 0x1f, Rev: 42}) {
		t.Fatalf("SlotFromEnv: %+v %v", s, err)
	}
	for k, v := range map[string]string{EnvName: "", EnvMax: "0", EnvLease: "xyz", EnvRev: "-3"} {
		if _, err := SlotFromEnv(env(good, k, v)); err == nil || errors.Is(err, ErrNoSlotEnv) || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: %v, want an error naming it", k, v, err)
		}
	}
	if !s.Of("", 0) || !s.Of("job", 2) || !s.Of("job", 0) || s.Of("other", 0) || s.Of("job", 3) {
		t.Errorf("Of: wrong match for %+v", s)
	}
}
