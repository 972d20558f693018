package main

import (
	"os"
	"strings"
	"testing"
)

// D10: while the child runs in a scope, STATUS= (and the -v line) names the scope, where
// `journalctl -u` finds what systemd says about it; in direct mode there is none to name.
func TestStartedNamesScope(t *testing.T) {
	for _, tc := range []struct{ scope, want string }{
		// systemd drops a lone backslash from a notify message: it is sent doubled (notifyEscape)
		{`conch-sema-batch\x2dworker-7.scope`, `STATUS=holding heavy-jobs[max=2], rev 7: command running (PID 4242 in conch-sema-batch\\x2dworker-7.scope)`},
		{"", "STATUS=holding heavy-jobs[max=2], rev 7: command running (PID 4242)"},
	} {
		var f fakeSinks
		r, _ := f.reporter(false, false)
		r.rev, r.scope = 7, tc.scope
		r.started(4242)
		if len(f.notes) != 1 || !strings.HasPrefix(f.notes[0], "READY=1\n") || !strings.HasSuffix(f.notes[0], "\n"+tc.want) {
			t.Errorf("scope %q: notify %q, want READY=1 and %q", tc.scope, f.notes, tc.want)
		}
	}
}

// D5: when conch's stdout and stderr are not journald's stream (a terminal, a pipe, a file:
// as under go test), the child gets them as they are and no relay runs.
func TestChildStdioUnchangedOffJournal(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "") // go test's stdio are pipes or a terminal anyway
	var f fakeSinks
	r, _ := f.reporter(true, false)
	stdio, closeLog := childStdio(r, "/usr/bin/batch-worker")
	defer closeLog()
	if stdio.Stdin != os.Stdin || stdio.Stdout != os.Stdout || stdio.Stderr != os.Stderr {
		t.Errorf("childStdio = %v %v %v, want conch's own stdin, stdout and stderr", stdio.Stdin, stdio.Stdout, stdio.Stderr)
	}
}
