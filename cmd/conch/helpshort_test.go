package main

import (
	"strings"
	"testing"

	"github.com/jessevdk/go-flags"
)

// `conch sema --help` is short and readable: at most 90 lines of at most 100 columns, every
// option named, the exit statuses in a line and the man page named for the rest; `conch
// --help` names the command without repeating its synopsis, exit table or examples. Before,
// `conch sema --help` was 331 lines in a 30-column description column, and `conch --help`
// repeated the table and the examples.
func TestShortHelp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("sema", "--help")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.status != 0 || len(lines) > 90 || !strings.Contains(r.stdout, "man conch") || !strings.Contains(r.stdout, "Exit status: ") {
		t.Fatalf("conch sema --help: %d lines, %v", len(lines), r)
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
	p := newParser(&globalOptions{}, &semaCmd{})
	var semaFlags []string
	for _, g := range append([]*flags.Group{p.Find("sema").Group}, p.Find("sema").Groups()...) {
		for _, o := range g.Options() {
			if !o.Hidden {
				semaFlags = append(semaFlags, o.LongName)
			}
		}
	}
	for _, flag := range semaFlags {
		if flag != "help" && flag != "version" && !strings.Contains(r.stdout, "--"+flag+" ") && !strings.Contains(r.stdout, "--"+flag+"\n") {
			t.Errorf("--help does not name --%s", flag)
		}
	}
	r = e.run("--help")
	if r.status != 0 || strings.Contains(r.stdout, "Exit status") || strings.Contains(r.stdout, "Examples") || !strings.Contains(r.stdout, "sema") {
		t.Fatalf("conch --help: %v, want the commands only", r)
	}
}

// A mistyped long flag gets the nearest one; a long flag typed with one dash is named as
// typed (go-flags said "unknown flag `m'" for -max). Before: "unknown flag `nonblok'" and
// "unknown flag `m'", with no hint.
func TestFlagTypos(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x", "--max", "1", "--nonblok", "--", "true"}, "unknown flag `--nonblok': did you mean --nonblock?"},
		{[]string{"x", "--mx", "2", "--", "true"}, "unknown flag `--mx': did you mean --max?"},
		{[]string{"x", "-max", "2", "--", "true"}, "unknown flag `-max': a long flag takes two dashes: --max"},
		{[]string{"x", "--max", "1", "--wiat=5s", "--", "true"}, "did you mean --wait?"},
	} {
		if r := e.run(append([]string{"sema"}, tc.args...)...); r.status != 64 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: %v, want 64 and %q", tc.args, r, tc.want)
		}
	}
}
