package unitrun

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	plain := filepath.Join(dir, "plain")
	sub := filepath.Join(dir, "subdir")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")

	tests := []struct {
		name, in string
		want     string // expected path when wantErr is nil
		wantErr  error
	}{
		{"found in PATH", "tool", exe, nil},
		{"system command", "sh", "", nil},
		{"absolute path", exe, exe, nil},
		{"missing in PATH", "conch-no-such-command", "", ErrNotFound},
		{"missing path", filepath.Join(dir, "nope"), "", ErrNotFound},
		{"empty name", "", "", ErrNotFound},
		{"path without x bit", plain, "", ErrNotExecutable},
		{"directory", sub, "", ErrNotExecutable},
		{"PATH entry without x bit", "plain", "", ErrNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Resolve(%q) = %q, %v; want error %v", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.in, err)
			}
			if tt.want != "" && got != tt.want {
				t.Fatalf("Resolve(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got == "" {
				t.Fatalf("Resolve(%q) returned an empty path", tt.in)
			}
		})
	}
}

// A relative $PATH entry is honoured as a shell does, not refused like exec.ErrDot.
func TestResolveRelativePathEntry(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("PATH", ".:/usr/bin:/bin")
	got, err := Resolve("tool")
	if err != nil || got != "tool" {
		t.Fatalf(`Resolve("tool") = %q, %v; want "tool", nil`, got, err)
	}
}
