package main

import (
	"errors"
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

// filePath is a flag naming a file: the shells complete file names. Given empty it is
// refused: --textfile "" would otherwise read as not given, and the metrics go to stdout
// while the operator expects a file.
type filePath string

// UnmarshalFlag implements flags.Unmarshaler: an empty (or blank) path is refused.
func (p *filePath) UnmarshalFlag(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty: name the file to write")
	}
	*p = filePath(s)
	return nil
}

// Complete implements flags.Completer: file names, as flags.Filename.
func (filePath) Complete(match string) []flags.Completion {
	var f flags.Filename
	return f.Complete(match)
}
