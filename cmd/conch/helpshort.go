package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/jessevdk/go-flags"
)

// The short --help of `conch sema` (writeSemaHelp): one line per option, the synopsis and
// the exit statuses in a line each; the full descriptions, the exit table, the environment
// and the examples are in the man page (writeManPage), made from the same parser.

const (
	helpWidth   = 100 // the lines' width
	helpFlagCol = 30  // where an option's summary starts
)

// writeSemaHelp writes `conch sema --help` to w from the parser p: the usage line, the
// description's first paragraph, the synopsis, each option with the first clause of its
// description (up to "; " or " (") and its default and variable, a line of exit statuses
// and where the rest is.
func writeSemaHelp(w io.Writer, p *flags.Parser) {
	sema := p.Find("sema")
	first, _, _ := strings.Cut(semaLong, "\n\n")
	fmt.Fprintf(w, "Usage: conch sema %s\n\n%s\n\n", (&semaCmd{}).Usage(), wrapText(first, helpWidth, ""))
	fmt.Fprint(w, semaSynopsis)
	writeGroupHelp(w, sema.Group, "Options")
	fmt.Fprintf(w, "\nGlobal options:\n%s\n", optionHelp(&flags.Option{ShortName: 'h', LongName: "help", Description: "this help"}))
	for _, g := range p.Groups() {
		for _, o := range g.Options() {
			if !o.Hidden {
				fmt.Fprintln(w, optionHelp(o))
			}
		}
	}
	fmt.Fprint(w, `
Exit status: the child's own; 75 (or -E N) no slot; 64 a usage error or a refusal (nothing
written); 69 etcd unreachable or no scope; 70 the slot was lost; 124 --runtime-max; 126/127
the command cannot run; --who: 0 holders, 1 empty.
The full descriptions, the exit status table, the environment and examples: man conch.
`)
}

// writeGroupHelp writes g's options under title, then those of its subgroups under theirs.
func writeGroupHelp(w io.Writer, g *flags.Group, title string) {
	var lines []string
	for _, o := range g.Options() {
		if o.Hidden || o.LongName == "help" {
			continue
		}
		lines = append(lines, optionHelp(o))
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n%s:\n%s\n", title, strings.Join(lines, "\n"))
	}
	for _, sub := range g.Groups() {
		writeGroupHelp(w, sub, sub.ShortDescription)
	}
}

// optionHelp is o's line: "  -n, --nonblock VALUE   summary (default: X) [$VAR]", wrapped.
func optionHelp(o *flags.Option) string {
	name := "    "
	if o.ShortName != 0 {
		name = "-" + string(o.ShortName) + ", "
	}
	name = "  " + name + "--" + o.LongName
	if o.ValueName != "" {
		name += " " + o.ValueName
	}
	sum, _, _ := strings.Cut(o.Description, "; ")
	for strings.Count(sum, "(") > strings.Count(sum, ")") { // the cut was inside an aside: drop it
		sum = strings.TrimSpace(sum[:strings.LastIndex(sum, "(")])
	}
	for _, stop := range []string{" (", ": ", ", "} { // still long: drop a late aside
		if i := strings.LastIndex(sum, stop); len(sum) > 120 && i > 40 {
			sum = sum[:i]
		}
	}
	if def := optionDefault(o); def != "" {
		sum += " (default: " + def + ")"
	}
	if o.EnvDefaultKey != "" {
		sum += " [$" + o.EnvDefaultKey + "]"
	}
	if len(name) >= helpFlagCol-1 {
		return name + "\n" + wrapText(sum, helpWidth, strings.Repeat(" ", helpFlagCol))
	}
	return name + strings.Repeat(" ", helpFlagCol-len(name)) + strings.TrimLeft(wrapText(sum, helpWidth, strings.Repeat(" ", helpFlagCol)), " ")
}

// optionDefault is the default --help shows for o: its mask, else its default; "" for none.
func optionDefault(o *flags.Option) string {
	switch {
	case o.DefaultMask == "-":
		return ""
	case o.DefaultMask != "":
		return o.DefaultMask
	}
	return strings.Join(o.Default, ",")
}

// wrapText wraps s at width, each line starting with indent.
func wrapText(s string, width int, indent string) string {
	var out []string
	line := indent
	for _, word := range strings.Fields(s) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			out = append(out, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	return strings.Join(append(out, line), "\n")
}
