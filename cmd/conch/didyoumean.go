package main

import (
	"strings"

	"github.com/jessevdk/go-flags"
)

// unknownFlagHint words go-flags' "unknown flag `x'" (ErrUnknownFlag) as the operator typed
// the flag, with the nearest long flag of p when one is within two edits ("--nonblok": did
// you mean --nonblock?) or the word typed with one dash is a long flag ("-max 2": go-flags
// reads -m -a -x). before is the argv before "--". ok is false when there is nothing better
// to say than go-flags (a one-letter flag with no long one near: a child's flag, as
// `ls -l`).
func unknownFlagHint(p *flags.Parser, ferr *flags.Error, before []string) (string, bool) {
	name, found := strings.CutPrefix(ferr.Message, "unknown flag `")
	name, _ = strings.CutSuffix(name, "'")
	if !found || name == "" {
		return "", false
	}
	typed, word := "--"+name, name
	if len(name) == 1 { // a short flag: the word it came from, if typed with one dash
		typed, word = "", ""
		for _, a := range before {
			if strings.HasPrefix(a, "-"+name) && !strings.HasPrefix(a, "--") && len(a) > 2 {
				typed, _, _ = strings.Cut(a, "=")
				word = typed[1:]
				break
			}
		}
		if word == "" {
			return "", false
		}
	}
	best, dist := "", 3
	for _, long := range longFlags(p) {
		if d := typoDistance(word, long); d < dist {
			best, dist = long, d
		}
	}
	switch {
	case best == "":
		return "", false
	case typed[1] != '-' && dist == 0:
		return "unknown flag `" + typed + "': a long flag takes two dashes: --" + best, true
	}
	return "unknown flag `" + typed + "': did you mean --" + best + "?", true
}

// hinted reports whether unknownFlagHint has a hint for ferr.
func hinted(p *flags.Parser, ferr *flags.Error, before []string) bool {
	_, ok := unknownFlagHint(p, ferr, before)
	return ok
}

// longFlags are the long names of every option of p, its commands' included.
func longFlags(p *flags.Parser) []string {
	var out []string
	var walk func(g *flags.Group)
	walk = func(g *flags.Group) {
		for _, o := range g.Options() {
			if o.LongName != "" && !o.Hidden {
				out = append(out, o.LongName)
			}
		}
		for _, sub := range g.Groups() {
			walk(sub)
		}
	}
	walk(p.Group)
	for _, c := range p.Commands() {
		walk(c.Group)
	}
	return out
}
