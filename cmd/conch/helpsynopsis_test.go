package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The --who and --held forms of --help's synopsis are the command reference's
// (docs/reference.md), word for word (a <name>
// optional in one and required in the other misleads), and --max's help names every form
// where it may be left out (validate.go: --who and --held; the others refuse its absence).
func TestHelpSynopsisMatchesReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "conch sema ") {
			l, _, _ = strings.Cut(l, "#")
			readme[strings.TrimSpace(l)] = true
		}
	}
	form := regexp.MustCompile(`(?m)^  (conch sema .*--(?:who|held).*?)(?:\s+\(.*\))?$`)
	synopsis, _, _ := strings.Cut(semaEpilog, "\n\n")
	forms := form.FindAllStringSubmatch(synopsis, -1)
	if len(forms) < 5 {
		t.Fatalf("found %d --who/--held forms in --help's synopsis, want at least 5", len(forms))
	}
	for _, m := range forms {
		if !readme[strings.TrimSpace(m[1])] {
			t.Errorf("--help's synopsis line %q is not in docs/reference.md's synopsis", m[1])
		}
	}
	if !strings.Contains(string(b), "conch sema [<name>] [--max N] --who --format prometheus") {
		t.Error("docs/reference.md: --who --format prometheus takes an optional <name>")
	}
	desc := regexp.MustCompile(`long:"max" [^\n]*description:"([^"]*)"`).FindStringSubmatch(mustRead(t, "options.go"))
	if desc == nil || !strings.Contains(desc[1], "--who") || !strings.Contains(desc[1], "--held") {
		t.Errorf("--max's help %q does not say it is optional with --who and --held", desc)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
