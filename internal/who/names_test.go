package who

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema/schema"
)

// LiveNames lists each name with keys or a pause once, skips foreign keys, and reads past a
// long queue and more names than one page holds.
func TestLiveNames(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	put := func(k string) {
		t.Helper()
		if _, err := c.Put(t.Context(), k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range namesPage + 10 { // more names than one read returns
		name := fmt.Sprintf("n%03d", i)
		want = append(want, name)
		put(schema.Prefix(name, 1) + "a")
	}
	for i := range 3 * namesPage { // a queue longer than a page: jumped over
		put(schema.Prefix("n000", 1) + fmt.Sprintf("q%04d", i))
	}
	put(schema.KeyRoot + "bad name/1/x")   // no valid name: skipped
	put(schema.PauseKey("paused-only", 2)) // a pause alone makes a name live
	want = append(want, "paused-only")
	put(schema.OnceKey("once-only", 1)) // so does a period marker (a --once-per job between runs)
	want = append(want, "once-only")
	slices.Sort(want)
	got, err := LiveNames(t.Context(), c)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("LiveNames = %v, %v; want %d names %v...", len(got), err, len(want), want[:3])
	}
	for name, in := range map[string]bool{"n005": true, "paused-only": true, "once-only": true, "n00": false, "nope": false} {
		// the hint's one read: whether the name is in use, and the live names when not
		used, live, err := NameSurvey(t.Context(), c, name, schema.Record{})
		if err != nil || used != in || !in && !slices.Equal(live, want) || in && live != nil {
			t.Errorf("NameSurvey(%q) = %v, %d names, %v; want %v and, when not in use, the %d live names", name, used, len(live), err, in, len(want))
		}
	}
}

// A run asks whether its name is in use beside its own enqueue: its own key (its record names
// the same host and process) does not count, whichever landed first; anyone else's does.
func TestNameSurveySkipsOwnKey(t *testing.T) {
	_, c := sematest.StartEtcd(t)
	self := schema.Record{Version: 1, Host: "node-a", PID: 4242, Since: time.Now()}
	other := self
	other.PID++
	for _, k := range []string{"live", "lives"} {
		if _, err := c.Put(t.Context(), schema.Prefix(k, 1)+"a", other.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	own := schema.Prefix("liev", 1) + "b"
	if _, err := c.Put(t.Context(), own, self.Encode()); err != nil {
		t.Fatal(err)
	}
	used, live, err := NameSurvey(t.Context(), c, "liev", self)
	if err != nil || used || !slices.Equal(live, []string{"liev", "live", "lives"}) {
		t.Errorf("NameSurvey beside its own key = %v, %v, %v; want not in use, with the live names", used, live, err)
	}
	if used, _, err := NameSurvey(t.Context(), c, "liev", other); err != nil || !used {
		t.Errorf("NameSurvey by another process = %v, %v; want in use", used, err)
	}
	if used, _, err := NameSurvey(t.Context(), c, "liev", schema.Record{}); err != nil || !used {
		t.Errorf("NameSurvey with no self = %v, %v; want in use", used, err)
	}
	if _, err := c.Put(t.Context(), schema.Prefix("liev", 1)+"c", other.Encode()); err != nil {
		t.Fatal(err)
	}
	if used, _, err := NameSurvey(t.Context(), c, "liev", self); err != nil || !used {
		t.Errorf("NameSurvey with its own key and another's = %v, %v; want in use", used, err)
	}
}
