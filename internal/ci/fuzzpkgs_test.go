package ci

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every package with a fuzz target is fuzzed by `make fuzz` (the Makefile's FUZZPKGS): a
// target whose package moved would otherwise run only over its seed corpus, unnoticed.
func TestFuzzPackagesListed(t *testing.T) {
	root := goList(t, "list", "-m", "-f", "{{.Dir}}")[0]
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^FUZZPKGS \?= (.*)$`).FindSubmatch(mk)
	if line == nil {
		t.Fatal("no FUZZPKGS line in the Makefile")
	}
	listed := strings.Fields(string(line[1]))
	target := regexp.MustCompile(`(?m)^func Fuzz\w*\(`)
	var fuzzed []string
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") || strings.Contains(p, "/testdata/") {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && target.Match(b) {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			fuzzed = append(fuzzed, "./"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fuzzed) == 0 {
		t.Fatal("found no fuzz target at all: the walk is wrong")
	}
	for _, pkg := range fuzzed {
		if !slices.Contains(listed, pkg) {
			t.Errorf("%s has fuzz targets but is not in the Makefile's FUZZPKGS (%s)", pkg, line[1])
		}
	}
	for _, pkg := range listed {
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			t.Errorf("FUZZPKGS lists %s, which does not exist", pkg)
		}
	}
}
