package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// troubleshooting is the manual's page of the lines conch prints, from the root.
const troubleshooting = "docs/troubleshooting.md"

var (
	// formatVerb is a fmt verb in a message's format string: a quoted line shows "..." there.
	formatVerb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
	// messagePiece separates the pieces a message is built of: "a: b", "a (b)".
	messagePiece = regexp.MustCompile(`: | \(|\)`)
)

// messageSources returns the string literals of the module's non-test Go sources that
// print or build messages (cmd, internal, sema, unitrun), each format verb cut out as "\x00".
func messageSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range []string{"cmd", "internal", "sema", "unitrun"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(formatVerb.ReplaceAllString(string(src), "\x00"))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Every line quoted in the troubleshooting page is one conch prints: each stretch of it
// between the varying parts ("...", NAME[max=N]) is in a message of the sources, so a
// reworded message fails here until the page follows.
func TestTroubleshootingLinesExist(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, troubleshooting))
	if err != nil {
		t.Fatal(err)
	}
	src := messageSources(t)
	bare := strings.ReplaceAll(src, "\x00", "") // a verb that printed nothing (an empty note)
	lines := 0
	for _, block := range codeBlocks(string(page)) {
		if block.lang != "" { // the commands; a block without a language holds conch's lines
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(block.body), "\n") {
			text, ok := strings.CutPrefix(line, "conch: ")
			if !ok {
				t.Errorf("%s: a quoted line that is not conch's: %q", troubleshooting, line)
				continue
			}
			lines++
			text = strings.NewReplacer("NAME[max=N]", "...", "WARNING: ", "...", `"..."`, "...").Replace(text)
			for _, part := range strings.Split(text, "...") {
				if part = strings.Trim(part, " :;,()"); len(part) < 8 || strings.Contains(src, part) || strings.Contains(bare, part) {
					continue
				}
				// a message built of several (a wrapped error, a note in parentheses): each
				// piece is one of its own
				if slices.ContainsFunc(messagePiece.Split(part, -1), func(p string) bool {
					p = strings.Trim(p, " :;,()")
					return len(p) >= 8 && !strings.Contains(src, p) && !strings.Contains(bare, p)
				}) {
					t.Errorf("%s quotes %q, but no message of the sources has %q", troubleshooting, line, part)
				}
			}
		}
	}
	if lines < 20 {
		t.Fatalf("found %d quoted lines in %s; is the parse right?", lines, troubleshooting)
	}
	t.Logf("%d quoted lines checked against the sources", lines)
}

// block is a fenced code block of a Markdown page: its language ("" for none), its text and
// the line its text starts on.
type block struct {
	lang, body string
	line       int
}

// codeBlocks returns the fenced code blocks of a Markdown page, in order.
func codeBlocks(page string) []block {
	var out []block
	var cur *block
	for i, l := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 2}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += l + "\n"
		}
	}
	return out
}
