package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Shell completion (GO_FLAGS_COMPLETION) answers from the parser and runs
// nothing: no etcd, no command, status 0.
func TestCompletion(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		mode string
		args []string
		want []string
		not  []string
	}{
		{"1", []string{""}, []string{"sema"}, nil},
		{"1", []string{"sema", "--ma"}, []string{"--max"}, nil},
		{"1", []string{"sema", "x", "--k"}, []string{"--key", "--kill-after"}, nil},
		{"1", []string{"-"}, []string{"--version"}, []string{"--man-page"}},
		{"verbose", []string{"sema", "--w"}, []string{"--wait  # give up after waiting D", "--who  # list holders"}, nil},
		// --scope's values, as a separate word and after "="
		{"1", []string{"sema", "x", "--scope", ""}, []string{"auto\n", "always\n", "never\n"}, nil},
		{"1", []string{"sema", "x", "--scope=n"}, []string{"--scope=never\n"}, []string{"auto"}},
		// Completion never executes: a command after the options is not run.
		{"1", []string{"sema", "x", "--max", "1", "--", "touch", ran}, nil, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("GO_FLAGS_COMPLETION", tc.mode)
			var out, errOut bytes.Buffer
			status, sig := run(tc.args, &out, &errOut, os.Getenv)
			if status != 0 || sig != 0 || errOut.Len() != 0 {
				t.Fatalf("status %d signal %v stderr %q", status, sig, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("completions %q lack %q", out.String(), w)
				}
			}
			if _, err := os.Stat(ran); err == nil {
				t.Fatal("completion ran the command")
			}
			for _, w := range tc.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("completions %q offer %q", out.String(), w)
				}
			}
		})
	}
}
