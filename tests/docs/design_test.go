package docs

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory (go test runs there).
const root = "../.."

// designRecord is the design record's path from the root (D12).
const designRecord = "docs/design.md"

var (
	// citation is how the tree cites a rule: D and a number, an amendment letter maybe.
	citation = regexp.MustCompile(`\bD[0-9]+[a-z]?\b`)
	// ruleHeading is a rule's section in the design record, "## D7. Title", or an
	// amendment's subsection within it, "### D7a. Title".
	ruleHeading = regexp.MustCompile(`(?m)^###? (D[0-9]+[a-z]?)\. \S`)
)

// skipped are the paths whose contents are not prose or code: build output, git's own files
// and the module checksums (base64 that may spell "D3").
var skipped = []string{".git", "bin", "dist", ".cache", "go.sum"}

// The rules the record explains, from the sections' headings, each with what it says, why and
// where in the code it lives.
func rules(t *testing.T) map[string]string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, designRecord))
	if err != nil {
		t.Fatalf("the design record (D12): %v", err)
	}
	sections := map[string]string{}
	locs := ruleHeading.FindAllSubmatchIndex(text, -1)
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		id := string(text[loc[2]:loc[3]])
		if _, dup := sections[id]; dup {
			t.Errorf("%s has two sections for %s", designRecord, id)
		}
		sections[id] = string(text[loc[0]:end])
	}
	return sections
}

// Every rule cited anywhere in the tree (code, tests, docs, scripts) has its section in the
// design record, so a citation resolves from a fresh clone (D12).
func TestEveryCitedRuleResolves(t *testing.T) {
	sections := rules(t)
	cited := map[string][]string{} // rule -> files citing it
	walkText(t, func(rel string, data []byte) {
		for _, m := range citation.FindAll(data, -1) {
			if id := string(m); !slices.Contains(cited[id], rel) {
				cited[id] = append(cited[id], rel)
			}
		}
	})
	if len(cited) < 10 {
		t.Fatalf("found only %d cited rules; is the walk looking at the tree?", len(cited))
	}
	for id, files := range cited {
		if _, ok := sections[id]; !ok {
			t.Errorf("%s is cited (in %s) but %s has no section \"## %s. ...\"", id, strings.Join(files, ", "), designRecord, id)
		}
	}
	t.Logf("%d rules cited, %d sections in %s", len(cited), len(sections), designRecord)
}

// walkText calls f with the path from the root and the contents of every text file of the tree
// (code, tests, docs, scripts), leaving out skipped paths and binaries.
func walkText(t *testing.T, f func(rel string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(skipped, rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) < 0 { // not a binary (a test build, an image)
			f(rel, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// trackerRef is a reference to this project's issue tracker or style guide by number (the word
// issue or STYLE, then a number): the tree's comments, messages and docs explain in place
// instead. An upstream project's issue ("Go issue 75804", "etcd issue 1") cites a public record
// and is allowed. Case is ignored, and "#12" counts as a number.
var trackerRef = regexp.MustCompile(`(?i)(?:\b(go|etcd|systemd|grpc|grpc-go|go-systemd|godbus|nfpm) )?\b(?:issues?|style) #?[0-9]+`)

// No file of the tree cites this project's issues or style guide by number.
func TestNoTrackerNumbers(t *testing.T) {
	files := 0
	walkText(t, func(rel string, data []byte) {
		files++
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range trackerRef.FindAllStringSubmatch(line, -1) {
				if m[1] != "" { // an upstream project's issue
					continue
				}
				t.Errorf("%s:%d cites a tracker number: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
	})
	if files < 100 {
		t.Fatalf("looked at only %d files; is the walk looking at the tree?", files)
	}
}

// Each section says what the rule is, why, and where it lives in the code; an amendment
// (D1a) follows a rule that exists.
func TestEverySectionSaysWhatWhyWhere(t *testing.T) {
	sections := rules(t)
	for _, want := range []string{"D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8", "D9", "D10", "D11", "D12", "D1a", "D7a", "D8a", "D8b"} {
		if _, ok := sections[want]; !ok {
			t.Errorf("%s has no section for %s", designRecord, want)
		}
	}
	for id, text := range sections {
		for _, part := range []string{"**Rule.**", "**Why.**", "**Where.**"} {
			if !strings.Contains(text, part) {
				t.Errorf("section %s lacks %s", id, part)
			}
		}
		if base := strings.TrimRight(id, "abcdefghijklmnopqrstuvwxyz"); base != id {
			if _, ok := sections[base]; !ok {
				t.Errorf("%s amends %s, which has no section", id, base)
			}
		}
	}
}

// README links the design record.
func TestReadmeLinksDesignRecord(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("("+designRecord+")")) {
		t.Errorf("README.md has no link to %s", designRecord)
	}
}

var (
	// namedPath is a file the docs name by its path from the root: a folder, then a file.
	namedPath = regexp.MustCompile("`([a-z][a-z0-9_./-]*/[a-zA-Z0-9_.-]+\\.(?:go|sh|md|roff|patch|service|timer))`")
	// namedTest is a Go test or benchmark the docs name.
	namedTest = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*\b`)
	// definedTest is where the tree defines one.
	definedTest = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)
)

// Every file and test README, the manual and the design record name exists in the tree, so
// "where it lives" leads somewhere after files move.
func TestNamedFilesAndTestsExist(t *testing.T) {
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && slices.Contains(skipped, d.Name()) {
			return cmpSkip(d, err)
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range definedTest.FindAllSubmatch(b, -1) {
				defined[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range userDocs(t) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range namedPath.FindAllSubmatch(text, -1) {
			if strings.ContainsAny(string(m[1]), "*<") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, string(m[1]))); err != nil {
				t.Errorf("%s names %s, which does not exist", doc, m[1])
			}
		}
		for _, name := range namedTest.FindAll(text, -1) {
			if !definedPrefix(defined, string(name)) {
				t.Errorf("%s names %s, which no test file defines", doc, name)
			}
		}
	}
}

// cmpSkip returns what WalkDir wants back for an entry that is skipped: err itself, or
// SkipDir for a folder.
func cmpSkip(d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	return filepath.SkipDir
}

// definedPrefix reports whether a test of that name, or named with it as a prefix (the docs
// name families such as TestHoldAfter), is defined.
func definedPrefix(defined map[string]bool, name string) bool {
	for d := range defined {
		if strings.HasPrefix(d, name) {
			return true
		}
	}
	return false
}

// userDocs returns the paths, from the root, of what a user reads: README.md and every page
// under docs/ (the manual, the design record, the benchmarks).
func userDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("found %d pages under docs/ (%v); is the walk looking at the tree?", len(pages), err)
	}
	docs := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		docs = append(docs, rel)
	}
	return docs
}

// Every page under docs/ is in both packages, beside README.md, whose links lead there: the
// .deb takes them with a glob, the .rpm (where nfpm takes no glob for documentation) with one
// entry per page in nfpm.yaml, which must not miss a new page.
func TestManualPagesPackaged(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join(root, "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(spec, []byte("  - src: docs/*.md\n    dst: /usr/share/doc/conch/docs\n    packager: deb\n")) {
		t.Error("nfpm.yaml: no entry puts docs/*.md into the .deb")
	}
	for _, doc := range userDocs(t)[1:] {
		entry := "  - src: " + doc + "\n    dst: /usr/share/doc/conch/" + doc + "\n    type: doc\n    packager: rpm\n"
		if !bytes.Contains(spec, []byte(entry)) {
			t.Errorf("nfpm.yaml: no .rpm entry for %s; add:\n%s", doc, entry)
		}
	}
}

// The record holds each rule as it stands: an amendment (D7b) is a subsection ("### D7b.")
// inside its rule's section, after the rule's heading and before the next rule's, and a rule
// with amendments says what it is today with them taken into account ("**As it stands.**").
func TestAmendmentsFoldedIntoTheirRule(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, designRecord))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?m)^## (D[0-9]+)\. `)
	amendment := regexp.MustCompile(`(?m)^(#+) (D[0-9]+)([a-z])\. `)
	starts := map[string]int{} // a rule's heading -> its offset
	for _, m := range rule.FindAllSubmatchIndex(text, -1) {
		starts[string(text[m[2]:m[3]])] = m[0]
	}
	// a rule's section ends where the next "## " heading starts
	end := func(start int) int {
		if i := bytes.Index(text[start+1:], []byte("\n## ")); i >= 0 {
			return start + 1 + i
		}
		return len(text)
	}
	amended := map[string]bool{}
	for _, m := range amendment.FindAllSubmatchIndex(text, -1) {
		label := string(text[m[4]:m[5]]) + string(text[m[6]:m[7]])
		base := string(text[m[4]:m[5]])
		start, ok := starts[base]
		switch {
		case string(text[m[2]:m[3]]) != "###":
			t.Errorf("%s: %s is a section of its own; make it a subsection (\"### %s. ...\") inside %s's section", designRecord, label, label, base)
		case !ok || m[0] < start || m[0] > end(start):
			t.Errorf("%s: %s is not inside %s's section: move it there, after %s's last amendment", designRecord, label, base, base)
		}
		amended[base] = true
	}
	for base := range amended {
		if start, ok := starts[base]; ok && !bytes.Contains(text[start:end(start)], []byte("**As it stands.**")) {
			t.Errorf("%s: %s has amendments but no \"**As it stands.**\" paragraph saying the rule today", designRecord, base)
		}
	}
	if len(amended) < 10 {
		t.Fatalf("found amendments to %d rules; is the parse right?", len(amended))
	}
}

// The record's index lists every rule and amendment, and every link in it leads to a heading
// of the record.
func TestDesignIndexComplete(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, designRecord))
	if err != nil {
		t.Fatal(err)
	}
	_, index, ok := strings.Cut(string(text), "\n## Index\n")
	if !ok {
		t.Fatalf("%s has no \"## Index\" section", designRecord)
	}
	index, _, _ = strings.Cut(index, "\n## ")
	slugs := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#{2,3} (.*)$`).FindAllStringSubmatch(string(text), -1) {
		slugs[headingSlug(h[1])] = true
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(index, -1) {
		if !slugs[m[1]] {
			t.Errorf("%s's index links #%s, which is no heading", designRecord, m[1])
		}
	}
	heading := regexp.MustCompile(`(?m)^###? ((D[0-9]+[a-z]?)\. .*)$`)
	for _, h := range heading.FindAllStringSubmatch(string(text), -1) {
		if id := h[2]; !strings.Contains(index, "["+id+"](#") {
			t.Errorf("%s's index does not list %s: add it to its rule's row, or a row of its own for a new rule:\n| [%s](#%s) | %s | |", designRecord, id, id, headingSlug(h[1]), strings.SplitN(h[1], ". ", 2)[1])
		}
	}
}

// headingSlug is the anchor GitHub gives a Markdown heading: lower case, only letters,
// digits, spaces, '-' and '_' kept, spaces made '-'.
func headingSlug(h string) string {
	h = strings.ToLower(h)
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}
