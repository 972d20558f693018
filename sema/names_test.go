package sema

import (
	"fmt"
	"slices"
	"testing"
)

// LiveNames lists each name with keys or a pause once, skips foreign keys, and reads past a
// long queue and more names than one page holds.
func TestLiveNames(t *testing.T) {
	_, c := startEtcd(t)
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
		put(Prefix(name, 1) + "a")
	}
	for i := range 3 * namesPage { // a queue longer than a page: jumped over
		put(Prefix("n000", 1) + fmt.Sprintf("q%04d", i))
	}
	put(KeyRoot + "bad name/1/x")   // no valid name: skipped
	put(PauseKey("paused-only", 2)) // a pause alone makes a name live
	want = append(want, "paused-only")
	put(OnceKey("once-only", 1)) // so does a period marker (a --once-per job between runs)
	want = append(want, "once-only")
	slices.Sort(want)
	got, err := LiveNames(t.Context(), c)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("LiveNames = %v, %v; want %d names %v...", len(got), err, len(want), want[:3])
	}
	for name, in := range map[string]bool{"n005": true, "paused-only": true, "once-only": true, "n00": false, "nope": false} {
		if got, err := NameInUse(t.Context(), c, name); err != nil || got != in {
			t.Errorf("NameInUse(%q) = %v, %v; want %v", name, got, err, in)
		}
		// the hint's one read: the same answer, and the live names when not in use
		used, live, err := NameSurvey(t.Context(), c, name)
		if err != nil || used != in || !in && !slices.Equal(live, want) || in && live != nil {
			t.Errorf("NameSurvey(%q) = %v, %d names, %v; want %v and, when not in use, the %d live names", name, used, len(live), err, in, len(want))
		}
	}
}
