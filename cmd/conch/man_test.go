package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/etcdconn"
)

// The man page comes from the parser plus hand-written sections; it must
// document every option, every row of the exit table (D3) and every
// variable conch reads (D9) or sets (D5). Rendering without warnings is
// checked on the packaged page (tests/packaging).
func TestManPage(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var out, errOut bytes.Buffer
	if status, _ := run([]string{"--man-page"}, &out, &errOut, os.Getenv); status != 0 {
		t.Fatalf("--man-page: status %d, stderr %s", status, errOut.String())
	}
	page := out.String()
	if !strings.HasPrefix(page, `.TH conch 1 "14 November 2023" "conch `) {
		t.Errorf("title line: %q", strings.SplitN(page, "\n", 2)[0])
	}
	for _, want := range []string{
		".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH OPTIONS", ".SH EXIT STATUS", ".SH ENVIRONMENT",
		".SH FILES", ".SH EXAMPLES", ".SH SEE ALSO",
		`\fB\-\-max\fR \fIN\fR`, `\fB\-\-conflict-exit-code\fR`, `\fB\-\-dial-timeout\fR`,
		".B 75 (or \\-E N)\n", ".B 64\n", ".B 69\n", ".B 70\n", ".B 124\n", ".B 126 / 127\n", ".B child's status\n", ".B \\-\\-who\n",
		".B CONCH_ENDPOINTS\n", ".B CONCH_PASSWORD_FILE\n", ".B CONCH_CONFIG\n", ".B CONCH_REV\n", ".B NOTIFY_SOCKET\n",
		"/etc/conch/conch.conf",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	if n := strings.Count(page, "counting semaphore kept in etcd"); n != 1 {
		t.Errorf("the description appears %d times, want once", n)
	}
	if strings.Contains(page, "man-page") {
		t.Error("the hidden --man-page option is documented")
	}
	// No body line may start with a control character that is not a request.
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "'") {
			t.Errorf("line %d starts with ': %q", i+1, l)
		}
	}
}

// manExitStatus makes one tagged paragraph of each row, as plain roff text (no backquotes,
// hyphens escaped), then the note on the lines that precede an exit.
func TestManExitStatusRows(t *testing.T) {
	got := manExitStatus([]exitRow{{"0", "fine"}, {"75 (or `-E N`)", "no slot, really none"}, {"`--who`", "0 or 1"}})
	want := ".SH EXIT STATUS\n.TP\n.B 0\nfine\n.TP\n.B 75 (or \\-E N)\nno slot, really none\n.TP\n.B \\-\\-who\n0 or 1\n.PP\n"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("got:\n%s\nwant prefix:\n%s", got, want)
	}
}

// Help and man page show the real defaults of options that also come from the
// environment (go-flags' man page wrote "<default: $CONCH_NODE>"), and no made-up default
// for those that have none.
func TestDefaultsShown(t *testing.T) {
	var man, help, errOut bytes.Buffer
	if status, _ := run([]string{"--man-page"}, &man, &errOut, fixedEnv(nil)); status != 0 {
		t.Fatalf("--man-page: status %d, stderr %s", status, errOut.String())
	}
	if status, _ := run([]string{"sema", "--help"}, &help, &errOut, fixedEnv(nil)); status != 0 {
		t.Fatalf("--help: status %d, stderr %s", status, errOut.String())
	}
	for _, want := range []string{`\fB\-\-node\fR \fINAME\fR <default: \fIthe kernel hostname\fR>`, `\fB\-\-dial-timeout\fR \fID\fR <default: \fI5s\fR>`,
		`\fB\-\-endpoints\fR \fIURLS\fR <default: \fI` + etcdconn.DefaultEndpoint + `\fR>`, `\fB\-\-config\fR \fIFILE\fR <default: \fI` + defaultConfigPath + `\fR>`,
		"(default: 5s)\n"} {
		if !strings.Contains(man.String(), want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	if strings.Contains(man.String(), "<default: \\fI$") {
		t.Errorf("man page shows a variable as a default: %q", man.String())
	}
	h := strings.Join(strings.Fields(help.String()), " ")
	for _, want := range []string{"(default: the kernel hostname) [$CONCH_NODE]", "(default: 5s) [$CONCH_DIAL_TIMEOUT]", "(default: " + etcdconn.DefaultEndpoint + ") [$CONCH_ENDPOINTS]"} {
		if !strings.Contains(h, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if etcdconn.DefaultDialTimeout.String() != "5s" {
		t.Errorf("default-mask says 5s, etcdconn.DefaultDialTimeout is %v", etcdconn.DefaultDialTimeout)
	}
}

// The exit-status table has one text, exitRows (D3): --help shows it (exitTable), the man
// page is made from that, and the manual's exit-status page (docs/exit-status.md) holds the
// same rows, word for word.
func TestExitTableOneSource(t *testing.T) {
	var page strings.Builder
	if err := writeManPage(&page, newParser(&globalOptions{}, &semaCmd{})); err != nil {
		t.Fatal(err)
	}
	for _, r := range exitRows {
		entry := ".TP\n.B " + roffText(plainText(r.status)) + "\n" + roffText(plainText(r.meaning)) + "\n"
		if !strings.Contains(page.String(), entry) {
			t.Errorf("the man page lacks the exit status row %q as\n%s", r.status, entry)
		}
		if !strings.Contains(semaEpilog, "\n  "+plainText(r.status)+"  ") {
			t.Errorf("--help lacks the exit status row %q", r.status)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "exit-status.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Exit status\n")
	var got []exitRow
	for _, l := range strings.Split(section, "\n")[1:] {
		if !strings.HasPrefix(l, "| ") {
			if len(got) > 0 {
				break
			}
			continue
		}
		status, meaning, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
		got = append(got, exitRow{status, meaning})
	}
	if len(got) < 2 || !slices.Equal(got[2:], exitRows) {
		t.Errorf("docs/exit-status.md's exit status table differs from exitRows; its rows should read:\n%s", readmeRows(exitRows))
	}
}

// readmeRows is rows as the manual's Markdown table rows.
func readmeRows(rows []exitRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", r.status, r.meaning)
	}
	return b.String()
}
