package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/internal/systemdtest"
)

// manualPages are what an operator reads: README.md and the manual's pages, from the root
// (the design record, the benchmarks and the hostile-input tables are the developers').
func manualPages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range userDocs(t) {
		switch filepath.Base(p) {
		case "design.md", "benchmarks.md", "hostile-inputs.md", "hostile-records.md":
			continue
		}
		out = append(out, p)
	}
	return out
}

var (
	conchOnce sync.Once
	conchBin  string
	conchErr  error
)

// conchBinary builds conch from this tree once per test binary and returns its path.
func conchBinary(t *testing.T) string {
	t.Helper()
	conchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conch-docs-")
		if err != nil {
			conchErr = err
			return
		}
		conchBin = filepath.Join(dir, "conch")
		build := exec.Command("go", "build", "-o", conchBin, "./cmd/conch")
		build.Dir = systemdtest.ModuleRoot()
		if out, err := build.CombinedOutput(); err != nil {
			conchErr = fmt.Errorf("go build ./cmd/conch: %v\n%s", err, out)
		}
	})
	if conchErr != nil {
		t.Fatal(conchErr)
	}
	return conchBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if conchBin != "" {
		os.RemoveAll(filepath.Dir(conchBin))
	}
	os.Exit(code)
}

// otherTools are the long flags the manual names that are another program's, each with that
// program, which must be named on the same line.
var otherTools = map[string][]string{
	"--keys-only": {"etcdctl"}, "--prefix": {"etcdctl"}, "--no-block": {"systemctl"},
	"--no-pager": {"systemctl", "journalctl"}, "--now": {"systemctl"}, "--unit": {"systemd-run"},
	"--pedantic": {"lintian"}, "--initial-cluster-state": {"etcd"},
}

var longFlag = regexp.MustCompile(`(?:^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]+)`)

// Every long flag README and the manual name is one of conch's, as `conch sema --help` and
// `conch fleetlock --help` list them, or one of another program's named on the same line.
func TestManualFlagsExist(t *testing.T) {
	known := map[string]bool{}
	for _, command := range []string{"sema", "fleetlock"} {
		out, err := exec.Command(conchBinary(t), command, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("conch %s --help: %v\n%s", command, err, out)
		}
		for _, m := range longFlag.FindAllStringSubmatch(string(out), -1) {
			known[m[1]] = true
		}
	}
	if !known["--max"] || !known["--who"] || len(known) < 30 {
		t.Fatalf("found %d flags in --help: %v", len(known), known)
	}
	checked := 0
	for _, page := range manualPages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range longFlag.FindAllStringSubmatch(line, -1) {
				checked++
				if known[m[1]] {
					continue
				}
				if !slices.ContainsFunc(otherTools[m[1]], func(tool string) bool { return strings.Contains(line, tool) }) {
					t.Errorf("%s:%d names %s, which is not a flag of conch sema or conch fleetlock (nor of a program named on the line)", page, i+1, m[1])
				}
			}
		}
	}
	t.Logf("%d flags named in %d pages, all conch's or another program's", checked, len(manualPages(t)))
}

var (
	// installedPath is a path the packages install that the manual names.
	installedPath = regexp.MustCompile(`(/usr/(?:bin|libexec|share)/[A-Za-z0-9_./@-]*conch[A-Za-z0-9_./@{},-]*|/etc/conch/conch\.conf)`)
	// nfpmDst is where nfpm.yaml installs a file.
	nfpmDst = regexp.MustCompile(`(?m)^\s+dst: (\S+)`)
)

// Every path the manual and the man page name under /usr or /etc/conch/conch.conf is one the
// packages install (a file, or a folder of them; `{a,b}` expanded as the shell does).
func TestManualInstalledPathsExist(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join(root, "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dsts []string
	for _, m := range nfpmDst.FindAllStringSubmatch(string(spec), -1) {
		dsts = append(dsts, m[1])
	}
	installed := func(p string) bool {
		p = strings.TrimSuffix(p, "/")
		return slices.ContainsFunc(dsts, func(d string) bool { return d == p || strings.HasPrefix(d, p+"/") })
	}
	checked := 0
	for _, page := range append(manualPages(t), "cmd/conch/man/tail.roff") {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text = bytes.ReplaceAll(text, []byte(`\-`), []byte("-")) // roff's hyphen
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range installedPath.FindAllString(line, -1) {
				m = strings.TrimRight(m, ".,")
				for _, p := range braceExpand(m) {
					if strings.Contains(p, "*") {
						continue
					}
					checked++
					if !installed(p) {
						t.Errorf("%s:%d names %s, which the packages do not install (nfpm.yaml)", page, i+1, p)
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d installed paths; is the scan right?", checked)
	}
	t.Logf("%d installed paths named, all in nfpm.yaml", checked)
}

// braceExpand expands one {a,b} group as the shell does.
func braceExpand(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}

// notRun marks a command block the test does not run, with the reason, on the line before it.
var notRun = regexp.MustCompile(`^<!-- not run by tests/docs: (\S.*) -->$`)

// unsafe are words of a block the test refuses to run whatever its marks: it must be marked.
var unsafe = regexp.MustCompile(`\b(reboot|apt|apt-get|dnf|systemctl|make|etcdctl|cluster\.sh|cp)\b`)

// blockTimeout bounds one command block of the manual.
const blockTimeout = 2 * time.Minute

// Every shell block of README and the manual either runs, as written, against a real etcd,
// or says on the line before it why it is not run. A block runs in bash in a folder of its
// own, with conch on the PATH as a wrapper that runs this tree's conch with the command after
// `--` replaced by `true` (a job's command is the operator's, not the manual's), and each
// conch it runs must end with 0, 1 (`--who` with no holder) or 75 (no slot): never a usage
// error (64), an unreachable etcd (69) or a lost slot (70).
func TestManualCommandBlocks(t *testing.T) {
	conch := conchBinary(t)
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "bin", "conch")
	if err := os.MkdirAll(filepath.Dir(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/bash
# conch as the manual shows it, with the job's command replaced by true
args=()
for a in "$@"; do
	if [ "$a" = "--" ]; then args+=(-- true); break; fi
	args+=("$a")
done
"$DOCS_REAL_CONCH" "${args[@]}"
st=$?
printf '%s\t%s\n' "$st" "$*" >>"$DOCS_CONCH_LOG"
exit $st
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run, marked, calls := 0, 0, 0
	for _, page := range manualPages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for _, b := range codeBlocks(string(text)) {
			if b.lang != "sh" {
				continue
			}
			where := fmt.Sprintf("%s:%d", page, b.line-1)
			if b.line >= 3 && notRun.MatchString(lines[b.line-3]) {
				marked++
				continue
			}
			if m := unsafe.FindString(b.body); m != "" {
				t.Errorf("%s: a block that runs %q must say why it is not run (%q on the line before it)", where, m, "<!-- not run by tests/docs: REASON -->")
				continue
			}
			run++
			calls += runBlock(t, where, b.body, dir, conch, srv.Endpoint)
		}
	}
	if run < 5 || calls < 10 {
		t.Fatalf("ran %d blocks with %d conch calls; is the scan right?", run, calls)
	}
	t.Logf("%d command blocks run (%d conch calls), %d marked not run with the reason", run, calls, marked)
}

// runBlock runs one block of the manual and returns how many times it called conch.
func runBlock(t *testing.T, where, body, dir, conch, endpoint string) int {
	t.Helper()
	work, err := os.MkdirTemp(dir, "block-")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(work, ".conch-calls")
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", body)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"),
		"DOCS_REAL_CONCH="+conch, "DOCS_CONCH_LOG="+log,
		"CONCH_ENDPOINTS="+endpoint, "CONCH_CONFIG=/dev/null", "CONCH_NODE=node1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); ctx.Err() != nil {
		t.Errorf("%s: the block did not end within %v (%v); a block that cannot run to its end on one host says why on the line before it (%q):\n%s", where, blockTimeout, err, "<!-- not run by tests/docs: REASON -->", out.String())
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Errorf("%s: the block ran no conch: %v\n%s", where, err, out.String())
		return 0
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		st, args, _ := strings.Cut(l, "\t")
		n++
		if s, _ := strconv.Atoi(st); s != 0 && s != 1 && s != 75 {
			t.Errorf("%s: conch %s exited %s (a block that cannot run on one host says why on the line before it, %q):\n%s", where, args, st, "<!-- not run by tests/docs: REASON -->", out.String())
		}
	}
	return n
}

// README opens with the two fresh-machine commands, `make demo` and `make test`, before
// anything else, and CI runs the test command README gives (.ci/run); README stays a front
// door, at most 200 lines, the manual in docs/.
func TestReadmeFrontDoor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines: keep it a front door (at most 200) and move the rest into docs/", n)
	}
	blocks := codeBlocks(string(readme))
	if len(blocks) == 0 || blocks[0].line > 20 {
		t.Fatalf("README.md's first command block is not within its first 20 lines")
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(blocks[0].body), "\n") {
		c, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.TrimSpace(c))
	}
	if !slices.Equal(cmds, []string{"make demo", "make test"}) {
		t.Errorf("README.md's first commands are %q, want make demo and make test", cmds)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cmds[len(cmds)-1]) + `$`).Match(ci) {
		t.Errorf(".ci/run does not run README's test command %q on a line of its own", cmds[len(cmds)-1])
	}
}

// Every long flag `conch sema --help` lists is described in the command reference or, for
// the connection's, in the configuration page: the manual misses none.
func TestReferenceCoversHelp(t *testing.T) {
	out, err := exec.Command(conchBinary(t), "sema", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("conch sema --help: %v\n%s", err, out)
	}
	var pages []byte
	for _, p := range []string{"docs/reference.md", "docs/configuration.md"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, b...)
	}
	flags := 0
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z], )?(--[a-z][a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags++
		if !regexp.MustCompile("(?:`|, |\\[)" + regexp.QuoteMeta(m[1]) + "[ =`,\\]]").Match(pages) {
			t.Errorf("--help lists %s, which docs/reference.md and docs/configuration.md do not describe (as `%s`)", m[1], m[1])
		}
	}
	if flags < 30 {
		t.Fatalf("found %d flags in --help; is the parse right?", flags)
	}
}

// markdownLink is a link of a Markdown page: its target, and the anchor in it if any.
var markdownLink = regexp.MustCompile(`\]\(([^)#\s]*)(?:#([^)\s]*))?\)`)

// Every link of README and docs/ to a file of the tree leads to one that exists, and every
// link to a heading (page.md#anchor, or #anchor on the page) to a heading of that page.
func TestManualLinksResolve(t *testing.T) {
	links := 0
	for _, page := range userDocs(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(text), -1) {
			target, anchor := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
			}
			body, err := os.ReadFile(filepath.Join(root, file))
			if err != nil {
				t.Errorf("%s links %s, which does not exist", page, m[0])
				continue
			}
			if anchor == "" {
				continue
			}
			found := false
			for _, h := range regexp.MustCompile(`(?m)^#{1,6} (.*)$`).FindAllStringSubmatch(string(body), -1) {
				found = found || headingSlug(h[1]) == anchor
			}
			if !found {
				t.Errorf("%s links %s, but %s has no such heading", page, m[0], file)
			}
		}
	}
	if links < 50 {
		t.Fatalf("found %d links; is the scan right?", links)
	}
	t.Logf("%d links to the tree checked", links)
}
