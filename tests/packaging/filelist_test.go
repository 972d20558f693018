package packaging

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fileList is a snapshot of a file tree: absolute path (as seen from the tree's root) ->
// kind and permissions ("d 755", "f 644", "l 777").
type fileList map[string]string

// hostFileList walks root on the host, leaving out the subtrees in skip (absolute paths as
// seen from root).
func hostFileList(t *testing.T, root string, skip ...string) fileList {
	t.Helper()
	l := fileList{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if slices.Contains(skip, rel) {
			return fs.SkipDir
		}
		if rel == "/" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		l[rel] = fileKind(info.Mode())
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", root, err)
	}
	return l
}

func fileKind(m fs.FileMode) string {
	k := "f"
	switch {
	case m.IsDir():
		k = "d"
	case m&fs.ModeSymlink != 0:
		k = "l"
	}
	return fmt.Sprintf("%s %o", k, m.Perm())
}

// plus returns a copy of l with the entries of m added (m wins).
func (l fileList) plus(m fileList) fileList {
	c := maps.Clone(l)
	maps.Copy(c, m)
	return c
}

// diff describes how got differs from want, one line per path ("" when equal).
func (want fileList) diff(got fileList) string {
	var lines []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		switch g, ok := got[p]; {
		case !ok:
			lines = append(lines, "missing "+p+" ("+want[p]+")")
		case g != want[p]:
			lines = append(lines, fmt.Sprintf("changed %s: %s, want %s", p, g, want[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			lines = append(lines, "extra   "+p+" ("+got[p]+")")
		}
	}
	return strings.Join(lines, "\n")
}
