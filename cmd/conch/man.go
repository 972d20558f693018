package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"strings"

	"github.com/jessevdk/go-flags"
)

// writeManPage writes conch(1) in roff to w (`conch --man-page`, hidden;
// `make man` runs it). The options come from the go-flags parser p
// (Parser.WriteManPage), so the page cannot drift from --help; conch adds
// the synopsis, the description, and the EXIT STATUS (from exitRows, D3),
// ENVIRONMENT (from the parser's env tags, D5, D9, D10), FILES, EXAMPLES
// and SEE ALSO sections. The date honours SOURCE_DATE_EPOCH (reproducible
// builds). p is modified: build a fresh one (newParser).
func writeManPage(w io.Writer, p *flags.Parser) error {
	sema := p.Find("sema")
	if sema == nil {
		return fmt.Errorf("cannot write the man page: no sema command in the parser")
	}
	// The command's descriptions become the page's DESCRIPTION; left on
	// the command, go-flags would print them twice.
	p.LongDescription = semaLong
	sema.ShortDescription, sema.LongDescription = "", ""
	// conch fleetlock's description is printed once, under its options' heading
	if fl := p.Find("fleetlock"); fl != nil {
		fl.LongDescription = ""
	}

	var buf bytes.Buffer
	p.WriteManPage(&buf)
	page := buf.String()
	th, rest, _ := strings.Cut(page, "\n")
	page = th + fmt.Sprintf(" %q %q\n", "conch "+versionString(), "User Commands") + rest
	page = strings.Replace(page, "\\fBconch\\fP [OPTIONS]\n", manSynopsis, 1)
	page = strings.Replace(page, ".SS sema\n\n", ".SS sema\n", 1)
	page = strings.Replace(page, ".SH COMMANDS\n", ".SH COMMAND OPTIONS\n", 1)
	page, env := manEnvironment(page, sema)
	_, err := io.WriteString(w, page+manExitStatus(exitRows)+env+manTail)
	return err
}

// The hand-written parts of the page, in roff: the synopsis that replaces go-flags' one-line
// "conch [OPTIONS]"; the paragraph after the exit statuses; the fixed ENVIRONMENT entries
// (after those made from the env tags), FILES, EXAMPLES and SEE ALSO.
var (
	//go:embed man/synopsis.roff
	manSynopsis string
	//go:embed man/exit.roff
	manExitNote string
	//go:embed man/tail.roff
	manTail string
)

// roffText escapes plain text for a roff body line: backslashes, ASCII
// hyphens (as \- so options copy and paste as typed) and a leading control
// character.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// manExitStatus is the EXIT STATUS section: a tagged paragraph for each row of exitRows
// (the one table, D3), then manExitNote.
func manExitStatus(rows []exitRow) string {
	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	for _, r := range rows {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", roffText(plainText(r.status)), roffText(plainText(r.meaning)))
	}
	return b.String() + manExitNote
}

// eachOption calls f for every visible option of g and its subgroups.
func eachOption(g *flags.Group, f func(*flags.Option)) {
	for _, o := range g.Options() {
		if !o.Hidden {
			f(o)
		}
	}
	for _, sub := range g.Groups() {
		eachOption(sub, f)
	}
}

// manEnvironment fixes go-flags' page and makes the ENVIRONMENT section's first entries from
// the parser's env tags: where go-flags writes "<default: $CONCH_X>" for an option with an
// env tag and no default tag (wrong), the page shows the option's default-mask (the kernel
// hostname, 5s; --help uses the masks too), or nothing for the mask "-", in every command
// that has the option (sema and fleetlock share the connection's); each such variable
// gets an entry (the fixed ones open manTail). It returns the page and the section.
func manEnvironment(page string, sema *flags.Command) (string, string) {
	env := ".SH ENVIRONMENT\n"
	eachOption(sema.Group, func(o *flags.Option) {
		if o.EnvDefaultKey == "" {
			return
		}
		shown, def := "", ""
		if o.DefaultMask != "" && o.DefaultMask != "-" {
			shown, def = ` <default: \fI`+roffText(o.DefaultMask)+`\fR>`, " (default: "+roffText(o.DefaultMask)+")"
		}
		if len(o.Default) == 0 {
			page = strings.ReplaceAll(page, ` <default: \fI$`+o.EnvDefaultKey+`\fR>`, shown) // every command that shares the option
		}
		env += fmt.Sprintf(".TP\n.B %s\nas \\fB\\-\\-%s\\fP: %s%s\n", o.EnvDefaultKey, roffText(o.LongName), roffText(o.Description), def)
	})
	return page, env
}
