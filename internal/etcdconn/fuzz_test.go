package etcdconn

import (
	"strings"
	"testing"
)

// An endpoint list is accepted only when each endpoint checks; a
// URL's user-info never appears in an error.
func FuzzEndpoints(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2379", "https://a:1,https://b:2", "http://u:hunter2@h:1", ",", "unix:///x", "[::1]:2379", "h:0", "h:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseEndpoints(s)
		if err != nil {
			for _, e := range strings.Split(s, ",") {
				if _, rest, ok := strings.Cut(strings.TrimSpace(e), "://"); ok {
					if ui, _, ok := strings.Cut(rest, "@"); ok && len(ui) >= 4 && !strings.Contains(ui, "/") && strings.Contains(err.Error(), ui+"@") {
						t.Fatalf("error %q shows the user-info %q", err, ui)
					}
				}
			}
			return
		}
		if len(list) == 0 || len(list) > maxEndpoints {
			t.Fatalf("ParseEndpoints(%q) = %q", s, list)
		}
		for _, e := range list {
			if checkEndpoint(e) != nil || strings.Contains(e, ",") {
				t.Fatalf("ParseEndpoints(%q) kept %q", s, e)
			}
		}
	})
}
