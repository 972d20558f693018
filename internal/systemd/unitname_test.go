package systemd

import (
	"errors"
	"strings"
	"testing"
)

func TestScopeName(t *testing.T) {
	long128 := strings.Repeat("a", 128)
	dashes128 := strings.Repeat("-", 128) // 512 escaped characters
	for _, tc := range []struct {
		sema string
		rev  int64
		want string
	}{
		{"certs-renew", 8812, `conch-sema-certs\x2drenew-8812.scope`},
		{"heavy_jobs.v2", 1, "conch-sema-heavy_jobs.v2-1.scope"},
		{".hidden", 7, `conch-sema-\x2ehidden-7.scope`},
		{"a/b c", 3, `conch-sema-a-b\x20c-3.scope`},
		{long128, 9223372036854775807, "conch-sema-" + long128 + "-9223372036854775807.scope"},
	} {
		got := ScopeName(tc.sema, tc.rev)
		if got != tc.want {
			t.Errorf("ScopeName(%q, %d) = %q, want %q", tc.sema, tc.rev, got, tc.want)
		}
		if !validUnitName(got) {
			t.Errorf("ScopeName(%q, %d) = %q is not a valid unit name", tc.sema, tc.rev, got)
		}
	}

	// Too long once escaped: cut, hashed, still valid and distinct.
	a := ScopeName(dashes128, 42)
	b := ScopeName(dashes128[:127]+"x", 42)
	for _, name := range []string{a, b} {
		if len(name) > 255 || !validUnitName(name) {
			t.Errorf("ScopeName of a 128-dash name = %q (%d characters), want a valid unit name", name, len(name))
		}
		if !strings.HasPrefix(name, `conch-sema-\x2d\x2d`) || !strings.HasSuffix(name, "-42.scope") {
			t.Errorf("truncated name %q lost its shape conch-sema-<escaped>-<hash>-<rev>.scope", name)
		}
		// No \xNN escape is split by the cut.
		body := strings.TrimPrefix(name, "conch-sema-")
		body = body[:strings.LastIndexByte(body[:strings.LastIndexByte(body, '-')], '-')]
		if strings.Count(body, `\`)*4 != len(body) {
			t.Errorf("truncated name %q splits an escape sequence", name)
		}
	}
	if a == b {
		t.Errorf("two long names that differ only at the end map to the same scope %q", a)
	}
	if ScopeName(dashes128, 42) != a {
		t.Error("ScopeName is not deterministic")
	}
}

func TestValidUnitName(t *testing.T) {
	for name, want := range map[string]bool{
		"foo.scope":                         true,
		`conch-sema-a\x2db-1.scope`:         true,
		"getty@tty1.service":                true,
		"@tty1.service":                     false,
		"a@b@c.service":                     false,
		"foo":                               false,
		".scope":                            false,
		"foo bar.scope":                     false,
		"foo.unknown":                       false,
		strings.Repeat("a", 250) + ".scope": false,
	} {
		if got := validUnitName(name); got != want {
			t.Errorf("validUnitName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSliceName(t *testing.T) {
	for in, want := range map[string]string{
		"batch":                  "batch.slice",
		"batch.slice":            "batch.slice",
		"system-conch":           "system-conch.slice",
		"a:b_c.d-e":              "a:b_c.d-e.slice",
		"":                       "",
		".slice":                 "",
		"bad name":               "",
		"tmpl@x":                 "",
		strings.Repeat("a", 250): "",
	} {
		got, err := SliceName(in)
		if want == "" {
			if !errors.Is(err, ErrBadProperty) {
				t.Errorf("SliceName(%q) = %q, %v; want ErrBadProperty", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("SliceName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
