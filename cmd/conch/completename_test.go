package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
	"github.com/jessevdk/go-flags"
)

// completeWith runs conch's shell completion of args (GO_FLAGS_COMPLETION=1) with the
// environment env, and returns its candidates. Completion never fails: status 0, no stderr.
func completeWith(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	t.Setenv("GO_FLAGS_COMPLETION", "1")
	var out, errOut bytes.Buffer
	status, sig := run(args, &out, &errOut, func(k string) string {
		if k == "GO_FLAGS_COMPLETION" {
			return "1"
		}
		return env[k]
	})
	if status != 0 || sig != 0 || errOut.Len() != 0 {
		t.Fatalf("completion of %q: status %d signal %v stderr %q", args, status, sig, errOut.String())
	}
	return strings.Fields(out.String())
}

// <name> completes to the live semaphores' names (keys or a pause) that start with the word,
// read from etcd with the connection the options, the environment and the config file give;
// never to files; and to nothing when etcd does not answer, within about a second. Before,
// nothing came from conch, and the shells offered the files of the working directory.
func TestCompletionSemaphoreNames(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := srv.Client(t)
	for _, k := range []string{schema.Prefix("batch-worker", 2) + "a", schema.Prefix("batch-other", 1) + "b", schema.PauseKey("reboot", 1)} {
		if _, err := cl.Put(t.Context(), k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, "batch-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CONCH_ENDPOINTS": srv.Endpoint, "CONCH_CONFIG": os.DevNull}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want []string
	}{
		{env, []string{"sema", "ba"}, []string{"batch-other", "batch-worker"}},
		{env, []string{"sema", "--max", "2", ""}, []string{"batch-other", "batch-worker", "reboot"}},
		{env, []string{"sema", "-n", "--ttl=5s", "-v", "r"}, []string{"reboot"}},
		{env, []string{"sema", "--who", ""}, []string{"batch-other", "batch-worker", "reboot"}},
		// the endpoints from the command line
		{map[string]string{"CONCH_CONFIG": os.DevNull}, []string{"sema", "--endpoints", srv.Endpoint, "re"}, []string{"reboot"}},
		// not the name: a name given already, an option's value, the command
		{env, []string{"sema", "batch-worker", "ba"}, nil},
		{env, []string{"sema", "--node", "ba"}, nil},
		{env, []string{"ba"}, nil},
	} {
		got := completeWith(t, tc.env, tc.args...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("completion of %q = %q, want %q", tc.args, got, tc.want)
		}
	}

	// etcd does not answer (a port that accepts and says nothing): nothing, within the bound
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	began := time.Now()
	got := completeWith(t, map[string]string{"CONCH_ENDPOINTS": ln.Addr().String(), "CONCH_CONFIG": os.DevNull}, "sema", "ba")
	if took := time.Since(began); len(got) != 0 || took > completionTimeout+2*time.Second {
		t.Errorf("completion against a silent endpoint = %q after %v, want nothing within about %v", got, took, completionTimeout)
	}
}

// Both shell scripts complete as files the values of exactly the options whose value names
// a file (value-name FILE or PATH), and only those: everything else, <name> included, comes
// from conch.
func TestCompletionFileOptions(t *testing.T) {
	var want []string
	var walk func(g *flags.Group)
	walk = func(g *flags.Group) {
		for _, o := range g.Options() {
			if o.ValueName == "FILE" || o.ValueName == "PATH" {
				want = append(want, "--"+o.LongName)
			}
		}
		for _, sub := range g.Groups() {
			walk(sub)
		}
	}
	p := newParser(&globalOptions{}, &semaCmd{})
	walk(p.Group)
	for _, c := range p.Commands() {
		walk(c.Group)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	for _, script := range []string{"conch.bash", "_conch"} {
		src, err := os.ReadFile(filepath.Join("..", "..", "contrib", "completion", script))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`local fileopts='@?\(([^)]*)\)'`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no fileopts list", script)
		}
		got := strings.Split(string(m[1]), "|")
		slices.Sort(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s completes files for %v, want the options that take a FILE or PATH: %v", script, got, want)
		}
	}
}
