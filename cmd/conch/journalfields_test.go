package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every journal field conch writes and every CONCH_STATE value is listed, with its meaning,
// in the manual's docs/systemd.md and in the man page (D10): found in the module's sources, so a new
// field or state fails here until it is documented.
func TestJournalFieldsDocumented(t *testing.T) {
	var srcs []string // the module's Go sources, wherever the journal code lives
	err := filepath.WalkDir(filepath.Join("..", ".."), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "bench" || d.Name() == "tests" || d.Name() == "testdata"):
			return fs.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".go"):
			srcs = append(srcs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`(?:\[|\{|, )"(CONCH_[A-Z_]+)"(?:\]|:)`)
	state := regexp.MustCompile(`(?m)^\s*(?:const\s+)?state[A-Z]\w*\s*=\s*"([A-Z_]+)"`)
	want := map[string]bool{}
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range field.FindAllStringSubmatch(string(b), -1) {
			want[m[1]] = true
		}
		for _, m := range state.FindAllStringSubmatch(string(b), -1) {
			want["CONCH_STATE="+m[1]] = true
		}
	}
	for _, k := range []string{"CONCH_SEMA", "CONCH_STATE=HELD_AFTER", "CONCH_SKIPPED", "CONCH_STATE=LOST"} {
		if !want[k] {
			t.Fatalf("%s not found in the sources: the scan is broken (found %v)", k, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "systemd.md"))
	if err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join("man", "tail.roff"))
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "CONCH_STATE") // its values have the rows
	for k := range want {
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(k) + "` \\| \\S").Match(readme) {
			t.Errorf("docs/systemd.md: no table row for %s", k)
		}
		if !regexp.MustCompile(`(?m)^\.B ` + regexp.QuoteMeta(k) + `\n[^.]`).Match(man) {
			t.Errorf("man page: no .TP entry for %s", k)
		}
	}
}
