package systemd

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseProperty: any -p assignment is parsed without a panic, refused with
// ErrBadProperty or turned into a property with a name.
func FuzzParseProperty(f *testing.F) {
	for _, s := range []string{"MemoryMax=1G", "CPUQuota=50%", "KillSignal=SIGINT", "RuntimeMaxSec=1h", "MemoryMax=50%", "TasksMax=infinity",
		"MemoryMax=", "=1", "Nope=1", "CPUQuota=-1%", "RuntimeMaxSec=9999999999999999999y", "KillSignal=99", "MemoryMax=18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProperty(s)
		if err != nil {
			if !errors.Is(err, ErrBadProperty) {
				t.Fatalf("ParseProperty(%q): %v does not wrap ErrBadProperty", s, err)
			}
			return
		}
		if p.Name == "" || !strings.Contains(s, "=") {
			t.Fatalf("ParseProperty(%q) = %+v", s, p)
		}
	})
}
