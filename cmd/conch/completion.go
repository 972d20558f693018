package main

import (
	"fmt"
	"io"

	"github.com/jessevdk/go-flags"
)

// printCompletions answers a shell's completion request (GO_FLAGS_COMPLETION
// set: go-flags completes the words instead of parsing them, and nothing
// runs). It writes one candidate per line; with verbose (the variable is
// "verbose") and several candidates, each is followed by two spaces, "# " and
// its description, which contrib/completion/_conch shows in zsh.
func printCompletions(w io.Writer, items []flags.Completion, verbose bool) {
	for _, it := range items {
		if verbose && len(items) > 1 && it.Description != "" {
			fmt.Fprintf(w, "%s  # %s\n", it.Item, it.Description)
			continue
		}
		fmt.Fprintln(w, it.Item)
	}
}
