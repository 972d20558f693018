package main

import (
	"fmt"
	"os"
	"strings"
)

// stampEv is one line of a bench-stamp file.
type stampEv struct {
	kind byte // 'S' first instruction, 'E' last
	tag  string
	pid  int
	t    int64
}

// readStamps parses a bench-stamp file; a missing file has no events.
func readStamps(path string) ([]stampEv, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var evs []stampEv
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" {
			continue
		}
		var e stampEv
		var kind string
		if _, err := fmt.Sscan(l, &kind, &e.tag, &e.pid, &e.t); err != nil || len(kind) != 1 {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		e.kind = kind[0]
		evs = append(evs, e)
	}
	return evs, nil
}

// countStamps counts events of kind whose tag starts with prefix.
func countStamps(path string, kind byte, prefix string) (int, error) {
	evs, err := readStamps(path)
	n := 0
	for _, e := range evs {
		if e.kind == kind && strings.HasPrefix(e.tag, prefix) {
			n++
		}
	}
	return n, err
}
