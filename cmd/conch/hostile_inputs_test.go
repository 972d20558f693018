package main

import (
	"strings"
	"testing"
)

// Inputs a hostile tester tried that conch took silently: --textfile "" (the metrics went to
// stdout, exit 0), an empty CONCH_DIAL_TIMEOUT or --dial-timeout "" (the default, silently),
// a --pause --reason of 64 KiB (written, then read back as unreadable). Each is refused (64)
// with a line, nothing written; a --reason of the limit's size is taken.
func TestHostileInputsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--who", "--format", "prometheus", "--textfile", ""}, "", "--textfile': empty"},
		{[]string{"hi", "--max", "1", "--dial-timeout", "", "--", "true"}, "", "--dial-timeout': empty"},
		{[]string{"hi", "--max", "1", "--", "true"}, "CONCH_DIAL_TIMEOUT=", "CONCH_DIAL_TIMEOUT is set but empty"},
		{[]string{"hi", "--max", "1", "--pause", "--reason", strings.Repeat("x", maxReason+1)}, "", "--reason is 1025 bytes: at most 1024"},
	} {
		saved := e.vars
		if tc.env != "" {
			e.vars = append(e.vars, tc.env)
		}
		r := e.run(append([]string{"sema"}, tc.args...)...)
		e.vars = saved
		if r.status != 64 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%.80q %s: %v, want 64 with %q", tc.args, tc.env, r, tc.want)
		}
	}
	if n := e.keys("/conch/"); n != 0 {
		t.Fatalf("%d keys written by refused invocations", n)
	}
	if r := e.run("sema", "hi", "--max", "1", "--pause", "--reason", strings.Repeat("x", maxReason)); r.status != 0 {
		t.Fatalf("--reason of %d bytes: %v", maxReason, r)
	}
}
