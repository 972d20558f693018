package packaging

import (
	"strings"
)

// dep5Paragraph is one paragraph of a machine-readable copyright file (DEP-5): its fields by
// name, each value with continuation lines joined by "\n" (the leading space removed, a "."
// line turned into an empty one).
type dep5Paragraph map[string]string

// parseDEP5 splits a DEP-5 copyright file into its paragraphs, in order. It does not
// validate: the tests check what they need.
func parseDEP5(text string) []dep5Paragraph {
	var paras []dep5Paragraph
	var cur dep5Paragraph
	var field string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			if cur != nil {
				paras = append(paras, cur)
			}
			cur, field = nil, ""
		case line[0] == ' ' || line[0] == '\t':
			if cur != nil && field != "" {
				l := strings.TrimSpace(line)
				if l == "." {
					l = ""
				}
				cur[field] += "\n" + l
			}
		default:
			name, value, _ := strings.Cut(line, ":")
			if cur == nil {
				cur = dep5Paragraph{}
			}
			field = name
			cur[field] = strings.TrimSpace(value)
		}
	}
	if cur != nil {
		paras = append(paras, cur)
	}
	return paras
}

// files returns the patterns of a Files paragraph (whitespace-separated, over any lines).
func (p dep5Paragraph) files() []string { return strings.Fields(p["Files"]) }

// license returns the short name of the License field and whether the field carries the
// licence text itself (lines after the first).
func (p dep5Paragraph) license() (name string, hasText bool) {
	first, rest, _ := strings.Cut(p["License"], "\n")
	return strings.TrimSpace(first), strings.TrimSpace(rest) != ""
}
