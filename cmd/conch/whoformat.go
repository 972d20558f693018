package main

import (
	"strings"

	"github.com/jessevdk/go-flags"
)

// whoFormat is --format's value (--who's output form); go-flags checks it
// against the choice tags, Complete offers them to the shells.
type whoFormat string

// whoFormats are --format's values, as its choice tags list them.
var whoFormats = []string{"text", "json", "prometheus"}

// Complete implements flags.Completer: the forms starting with match.
func (whoFormat) Complete(match string) []flags.Completion {
	var out []flags.Completion
	for _, f := range whoFormats {
		if strings.HasPrefix(f, match) {
			out = append(out, flags.Completion{Item: f})
		}
	}
	return out
}

// filePath is a flag naming a file: the shells complete file names.
type filePath = flags.Filename
