package packaging

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/internal/systemdtest"
)

// The files both packages install (zsh completion aside: its directory differs).
var commonFiles = []string{
	"/usr/bin/conch",
	"/usr/libexec/conch/conch-guardian",
	"/usr/share/man/man1/conch.1.gz",
	"/usr/share/bash-completion/completions/conch",
	"/etc/conch/conch.conf",
	"/usr/share/doc/conch/README.md",
	"/usr/share/doc/conch/examples/conch-worker.service",
	"/usr/share/doc/conch/examples/conch-maintenance.service",
	"/usr/share/doc/conch/examples/conch-maintenance.timer",
	"/usr/share/doc/conch/examples/conch-metrics.service",
	"/usr/share/doc/conch/examples/conch-metrics.timer",
	"/usr/share/doc/conch/examples/conch-fleetlock.service",
	"/usr/share/doc/conch/examples/conch-job@.service",
	"/usr/share/doc/conch/examples/conch-rolling-reboot.service",
	"/usr/share/doc/conch/examples/conch-rolling-reboot.timer",
	"/usr/share/doc/conch/examples/conch-rolling-reboot-release.service",
	"/usr/share/doc/conch/examples/conch-ha-job.service",
	"/usr/share/doc/conch/examples/conch-ha-job.timer",
	"/usr/share/doc/conch/examples/conch-etcd.conf",
	"/usr/share/doc/conch/examples/etcd.env",
	"/usr/share/doc/conch/examples/conch.conf",
	"/usr/share/doc/conch/examples/conch-rules.yml",
	"/usr/share/doc/conch/docs/getting-started.md",
	"/usr/share/doc/conch/docs/systemd.md",
}

// make package names its outputs conch_<version>_amd64.deb and conch-<version>.x86_64.rpm,
// with a version that is valid for both formats even without a tag.
func TestPackageNamesAndVersion(t *testing.T) {
	needPackages(t)
	if !regexp.MustCompile(`^[0-9][0-9A-Za-z.+~]*$`).MatchString(built.version) {
		t.Errorf("version %q is not a valid deb and rpm version (no '-', starts with a digit)", built.version)
	}
	if want := "conch_" + built.version + "_amd64.deb"; filepath.Base(built.deb) != want {
		t.Errorf(".deb is %s, want %s", filepath.Base(built.deb), want)
	}
	if want := "conch-" + built.version + ".x86_64.rpm"; filepath.Base(built.rpm) != want {
		t.Errorf(".rpm is %s, want %s", filepath.Base(built.rpm), want)
	}
}

// lintian finds no error in the .deb (warnings are printed for the record).
func TestDebLintian(t *testing.T) {
	needPackages(t)
	needTool(t, "lintian", "lintian")
	ctx := testContext(t, 5*time.Minute)
	start := time.Now()
	out, _, err := run(ctx, nil, "lintian", "--tag-display-limit", "0", "--fail-on", "error", built.deb)
	t.Logf("lintian %s (%v):\n%s", filepath.Base(built.deb), time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("lintian: %v", err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "E: ") {
			t.Errorf("lintian error: %s", l)
		}
	}
}

// The .deb's metadata, file list and conffiles.
func TestDebContents(t *testing.T) {
	needPackages(t)
	ctx := testContext(t, time.Minute)
	info, _, err := run(ctx, nil, "dpkg-deb", "--field", built.deb, "Package", "Version", "Architecture", "Section", "Priority", "Maintainer", "Depends")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Package: conch\n", "Version: " + built.version + "\n", "Architecture: amd64\n", "Section: admin\n", "Priority: optional\n", "Maintainer: "} {
		if !strings.Contains(info, want) {
			t.Errorf("control fields lack %q:\n%s", want, info)
		}
	}
	list, _, err := run(ctx, nil, "dpkg-deb", "--contents", built.deb)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(slices.Clone(commonFiles), "/usr/share/zsh/vendor-completions/_conch", "/usr/share/doc/conch/copyright", "/usr/share/doc/conch/changelog.gz") {
		if !strings.Contains(list, " ."+f+"\n") {
			t.Errorf(".deb lacks %s", f)
		}
	}
	if !regexp.MustCompile(`-rwxr-xr-x root/root +\d+ .* \./usr/bin/conch\n`).MatchString(list) {
		t.Errorf("/usr/bin/conch is not 0755 root:root:\n%s", list)
	}
	// Nothing is enabled or started: no unit in a system unit directory, no maintainer script.
	if strings.Contains(list, "/lib/systemd/") || strings.Contains(list, "/usr/lib/systemd/") {
		t.Errorf(".deb installs systemd units (only examples are wanted):\n%s", list)
	}
	conffiles, _, err := run(ctx, nil, "sh", "-c", `dpkg-deb --ctrl-tarfile "$1" | tar -xOf - ./conffiles`, "sh", built.deb)
	if err != nil || strings.TrimSpace(conffiles) != "/etc/conch/conch.conf" {
		t.Errorf("conffiles = %q (%v), want /etc/conch/conch.conf", conffiles, err)
	}
	ctrl, _, err := run(ctx, nil, "sh", "-c", `dpkg-deb --ctrl-tarfile "$1" | tar -tf -`, "sh", built.deb)
	if err != nil {
		t.Fatalf("listing the control archive: %v", err)
	}
	for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
		if strings.Contains(ctrl, s) {
			t.Errorf(".deb has a %s script; none is needed", s)
		}
	}
	// The binary in the package is the one the version names, and static.
	bin := filepath.Join(built.root, "usr/bin/conch")
	out, _, err := run(ctx, nil, bin, "--version")
	if err != nil || strings.TrimSpace(out) != "conch "+built.version {
		t.Errorf("conch --version = %q (%v), want conch %s", out, err, built.version)
	}
}

// The copyright file is a DEP-5 file that licenses conch itself Apache-2.0 (D12) and has
// one Files paragraph per module linked into the packaged binaries (go version -m), so each
// licence is accounted for, and none for a module that is not linked. Every licence named
// without its text has a standalone License paragraph.
func TestDebCopyrightNamesEveryModule(t *testing.T) {
	needPackages(t)
	ctx := testContext(t, time.Minute)
	copyright, err := os.ReadFile(filepath.Join(built.root, "usr/share/doc/conch/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	// Both Go programs of the package: conch and its guardian (D7a), whose modules are a
	// subset of conch's today; the copyright must cover their union.
	var linked []string
	for _, bin := range []string{"usr/bin/conch", "usr/libexec/conch/conch-guardian"} {
		out, _, err := run(ctx, nil, "go", "version", "-m", filepath.Join(built.root, bin))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "dep" && !slices.Contains(linked, f[1]) {
				linked = append(linked, f[1])
			}
		}
	}
	if len(linked) < 5 {
		t.Fatalf("go version -m listed %d modules: %v", len(linked), linked)
	}
	paras := parseDEP5(string(copyright))
	if len(paras) == 0 || paras[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" || paras[0]["Upstream-Name"] != "conch" {
		t.Fatalf("copyright does not start with a DEP-5 header paragraph: %v", paras[:min(1, len(paras))])
	}
	covered := map[string]int{}   // module path -> Files paragraphs naming it
	defined := map[string]bool{}  // standalone License paragraphs
	needText := map[string]bool{} // licences named in Files paragraphs without their text
	for _, p := range paras[1:] {
		name, hasText := p.license()
		if _, ok := p["Files"]; !ok {
			if name == "" || !hasText {
				t.Errorf("paragraph without Files is not a standalone licence: %v", p)
			}
			defined[name] = true
			continue
		}
		if p["Copyright"] == "" || name == "" {
			t.Errorf("Files: %s lacks Copyright or License", p["Files"])
		}
		if !hasText {
			needText[name] = true
		}
		for _, f := range p.files() {
			switch f {
			case "*":
				if name != "Apache-2.0" {
					t.Errorf("conch itself (Files: *) is %q, want Apache-2.0 (D12)", name)
				}
				covered["*"]++
			case "std/*": // the Go standard library
				covered[f]++
			default:
				mod, ok := strings.CutSuffix(f, "/*")
				if !ok || !slices.Contains(linked, mod) {
					t.Errorf("copyright has Files: %s, which names no module the binary links", f)
				}
				covered[mod]++
			}
		}
	}
	for _, m := range append([]string{"*", "std/*"}, linked...) {
		if covered[m] != 1 {
			t.Errorf("copyright has %d Files paragraphs for %s, want 1", covered[m], m)
		}
	}
	for l := range needText {
		if !defined[l] {
			t.Errorf("licence %s is named without its text and has no License paragraph", l)
		}
	}
}

// LICENSE at the root is the Apache License 2.0, word for word (D12): the same text as
// Debian's /usr/share/common-licenses/Apache-2.0 when that is there.
func TestLicenseIsApache2(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(systemdtest.ModuleRoot(), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License\n                           Version 2.0, January 2004\n", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
	debian, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0")
	if err != nil {
		ci.Unavailable(t, "cannot compare with Debian's copy: %v (apt-get install base-files)", err)
	}
	if !bytes.Equal(text, debian) {
		t.Errorf("LICENSE differs from /usr/share/common-licenses/Apache-2.0")
	}
}

// rpm -qip and -qlp show the metadata and files; the config file is %config(noreplace).
func TestRPMMetadataAndFiles(t *testing.T) {
	needPackages(t)
	needTool(t, "rpm", "rpm")
	ctx := testContext(t, time.Minute)
	info, _, err := run(ctx, nil, "rpm", "-qip", built.rpm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rpm -qip %s:\n%s", filepath.Base(built.rpm), info)
	for _, re := range []string{
		`(?m)^Name +: conch$`,
		`(?m)^Version +: ` + regexp.QuoteMeta(built.version) + `$`,
		`(?m)^Architecture: x86_64$`,
		`(?m)^License +: Apache-2.0$`,
		`(?m)^URL +: https://github.com/conch-project/conch$`,
		`(?m)^Summary +: Cluster-wide counting semaphore on etcd`,
	} {
		if !regexp.MustCompile(re).MatchString(info) {
			t.Errorf("rpm -qip lacks %s", re)
		}
	}
	list, _, err := run(ctx, nil, "rpm", "-qlp", built.rpm)
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(list)
	for _, f := range append(slices.Clone(commonFiles), "/usr/share/zsh/site-functions/_conch") {
		if !slices.Contains(files, f) {
			t.Errorf("rpm -qlp lacks %s:\n%s", f, list)
		}
	}
	cfg, _, err := run(ctx, nil, "rpm", "-qp", "--qf", `[%{FILENAMES} %{FILEFLAGS:fflags}\n]`, built.rpm)
	if err != nil || !strings.Contains(cfg, "/etc/conch/conch.conf cn\n") { // c: config, n: noreplace
		t.Errorf("/etc/conch/conch.conf is not %%config(noreplace): %s (%v)", cfg, err)
	}
	if !strings.Contains(cfg, "/usr/share/licenses/conch/LICENSE l\n") { // l: %license (D12)
		t.Errorf("the rpm does not ship LICENSE as %%license: %s", cfg)
	}
	scripts, _, _ := run(ctx, nil, "rpm", "-qp", "--scripts", built.rpm)
	if strings.TrimSpace(scripts) != "" {
		t.Errorf("the rpm has scriptlets; none is needed:\n%s", scripts)
	}
}

// The .rpm's payload has relative member names, as rpmbuild writes them (nfpm before v2.48.0
// wrote absolute ones, so `rpm2cpio | cpio -id` wrote into / itself), and rpm verifies its
// digests: `rpm2cpio | cpio -t` lists ./usr/bin/conch.
func TestRPMPayloadRelative(t *testing.T) {
	needPackages(t)
	needTool(t, "rpm2cpio", "rpm2cpio")
	needTool(t, "cpio", "cpio")
	ctx := testContext(t, time.Minute)
	list, _, err := run(ctx, nil, "sh", "-c", `rpm2cpio "$0" | cpio -t --quiet`, built.rpm)
	if err != nil {
		t.Fatal(err)
	}
	members := strings.Fields(list)
	if !slices.Contains(members, "./usr/bin/conch") {
		t.Errorf("the payload lacks ./usr/bin/conch:\n%s", list)
	}
	for _, m := range members {
		if !strings.HasPrefix(m, "./") {
			t.Errorf("payload member %q is not relative", m)
		}
	}
	if out, _, err := run(ctx, nil, "rpm", "-K", "-v", built.rpm); err != nil || strings.Contains(out, "BAD") {
		t.Errorf("rpm -K: %v\n%s", err, out)
	}
}

// man -l renders the packaged page without a single groff warning, at two widths.
func TestManPageRenders(t *testing.T) {
	needPackages(t)
	needTool(t, "man", "man-db")
	ctx := testContext(t, time.Minute)
	page := filepath.Join(built.root, "usr/share/man/man1/conch.1.gz")
	for _, width := range []string{"80", "60"} {
		env := append(os.Environ(), "MANWIDTH="+width, "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat")
		out, stderr, err := run(ctx, env, "man", "--warnings=w", "-l", page)
		if err != nil {
			t.Fatalf("man -l: %v", err)
		}
		if stderr != "" {
			t.Errorf("man -l at width %s warns:\n%s", width, stderr)
		}
		for _, want := range []string{"NAME", "SYNOPSIS", "OPTIONS", "--max N", "EXIT STATUS", "ENVIRONMENT", "CONCH_ENDPOINTS", "FILES", "/etc/conch/conch.conf", "EXAMPLES", "SEE ALSO"} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered page (width %s) lacks %q", width, want)
			}
		}
	}
}

// The bash completion script loads (with bash-completion, as installed) and completes
// options from conch itself and the command after "--" as a command.
func TestCompletionBash(t *testing.T) {
	needPackages(t)
	needTool(t, "bash", "bash")
	const lib = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(lib); err != nil {
		ci.Unavailable(t, "%s not found; install it with: apt-get install --no-install-recommends bash-completion", lib)
	}
	ctx := testContext(t, time.Minute)
	script := `
source "$LIB" || exit 1
source "$ROOT/usr/share/bash-completion/completions/conch" || exit 1
complete -p conch || exit 1
t() {
	COMP_LINE=$1 COMP_POINT=${#1}
	read -ra COMP_WORDS <<<"$1"
	[[ $1 == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_conch
	echo "$1=>${COMPREPLY[*]}"
}
t "conch se"
t "conch sema jobs --max 2 --ki"
t "conch sema jobs --ru"
t "conch sema jobs --max 2 -- bas"
t "conch sema jobs --scope "
t "conch sema jobs --scope=n"
t "conch sema jobs --cacert /et"
t "conch sema jobs --config=/et"
t "conch sema "
t "conch sema pa"
`
	// no etcd answers: <name> completes to nothing (never files, though "package_test.go" is here)
	env := append(os.Environ(), "LIB="+lib, "ROOT="+built.root, "PATH="+filepath.Join(built.root, "usr/bin")+":"+os.Getenv("PATH"),
		"CONCH_ENDPOINTS=127.0.0.1:1", "CONCH_CONFIG=/dev/null")
	out, stderr, err := run(ctx, env, "bash", "--norc", "--noprofile", "-c", script)
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	t.Logf("bash completion:\n%s%s", out, stderr)
	for _, want := range []string{
		"complete -F _conch conch\n",
		"conch sema jobs --cacert /et=>/etc\n", // a file option's value: files
		"conch sema jobs --config=/et=>/etc\n",
		"conch sema =>\n", // <name>: the live names, none here, and no files
		"conch sema pa=>\n",
		"conch se=>sema\n",
		"conch sema jobs --max 2 --ki=>--kill-after\n",
		"conch sema jobs --ru=>--runtime-max\n",
		"conch sema jobs --scope =>always auto never\n",
		"conch sema jobs --scope=n=>never\n", // what follows "=" (COMP_WORDBREAKS)
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bash completion output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`conch sema jobs --max 2 -- bas=>.*\bbash\b`).MatchString(out) {
		t.Errorf("after --, bash did not complete a command name (bash):\n%s", out)
	}
}

// The zsh completion function loads through compinit from its installed directory,
// registers for conch, and turns conch's answers into described candidates (zsh's
// _describe and _files are replaced by stubs that print what they were given).
func TestCompletionZsh(t *testing.T) {
	needPackages(t)
	needTool(t, "zsh", "zsh")
	ctx := testContext(t, time.Minute)
	script := `
fpath=($ROOT/usr/share/zsh/vendor-completions $fpath)
autoload -Uz compinit && compinit -u -d $DUMP
print -r -- "registered: $_comps[conch]"
autoload -Uz +X _conch
_describe() { print -rl -- "${(@P)${@[-1]}}" }
_files() { print -r -- "(files)" }
_normal() { print -r -- "(command line: $words)" }
words=(conch sema --w); CURRENT=3; _conch
words=(conch s); CURRENT=2; _conch
words=(conch sema jobs --cacert /et); CURRENT=5; _conch
words=(conch sema jobs --max 1 -- ls -l); CURRENT=8; _conch
words=(conch sema pa); CURRENT=3; _conch; print -r -- "name: status $?"
`
	env := append(os.Environ(), "ROOT="+built.root, "DUMP="+filepath.Join(t.TempDir(), "zcompdump"),
		"PATH="+filepath.Join(built.root, "usr/bin")+":"+os.Getenv("PATH"), "CONCH_ENDPOINTS=127.0.0.1:1", "CONCH_CONFIG=/dev/null")
	out, stderr, err := run(ctx, env, "zsh", "-f", "-c", script)
	if err != nil {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	t.Logf("zsh completion:\n%s%s", out, stderr)
	for _, want := range []string{
		"registered: _conch\n",
		"--wait:give up after waiting D for a slot",
		"--who:list holders and waiters",
		"\nsema\n",
		"(files)\n",
		"(command line: ls -l)\n",
		// <name> with no etcd answering: nothing, not files
		"(command line: ls -l)\nname: status 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("zsh completion output lacks %q", want)
		}
	}
	if stderr != "" {
		t.Errorf("zsh wrote to stderr: %s", stderr)
	}
}
