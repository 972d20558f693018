package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The passwords conch was given in its environment (ETCDCTL_PASSWORD, ETCDCTL_USER
// NAME:PASSWORD) or argv (--user NAME:PASSWORD) are not in its /proc/PID/environ nor
// cmdline while it runs, which any process of its user (its child included) can read; the
// argv form is warned of. Before, both showed them.
func TestPasswordsHiddenFromProc(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no auth: etcd answers "auth not enabled", which clientv3 takes as no login needed
	e.vars = append(e.vars, "ETCDCTL_USER=bob:hunter2", "ETCDCTL_PASSWORD=hunter3")
	p := e.start("sema", "scrub", "--max", "1", "--user", "bob:hunter4", "--", "sh", "-c", e.gated("a"))
	waitFor(t, "a holds", func() bool { return e.held("a") })
	pid := strconv.Itoa(p.cmd.Process.Pid)
	for _, f := range []string{"environ", "cmdline"} {
		data, err := os.ReadFile("/proc/" + pid + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "hunter") {
			t.Errorf("/proc/PID/%s of conch shows a password: %q", f, strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	e.open("a")
	r := p.wait(t)
	if r.status != 0 || !strings.Contains(r.stderr, "WARNING: --user NAME:PASSWORD puts the password on the command line") {
		t.Fatalf("--user NAME:PASSWORD: %v, want it run, warned", r)
	}
}

// secretsInArgs finds the password of --user NAME:PASSWORD in both spellings, and nothing
// after "--" (the child's argv).
func TestSecretsInArgs(t *testing.T) {
	args := []string{"conch", "sema", "--user", "bob:pw1", "--user=al:pw22", "--", "--user", "x:child"}
	var b [][]byte
	for _, a := range args {
		b = append(b, []byte(a))
	}
	joined := strings.Join(args, "\x00")
	var got []string
	for _, sp := range secretsInArgs(b) {
		got = append(got, joined[sp[0]:sp[1]])
	}
	if strings.Join(got, ",") != "pw1,pw22" {
		t.Fatalf("secrets found: %q, want pw1 and pw22", got)
	}
}
