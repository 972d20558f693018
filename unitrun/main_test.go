package unitrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sigdefault"
)

// The test binary plays three parts: the tests; the guardian, when Run re-executes it with
// GuardianArg (Spec.Guardian defaults to /proc/self/exe); and a "Run caller" helper process
// (helperEnv set) for tests that must kill the caller or give it a controlling terminal.
const (
	helperEnv       = "UNITRUN_TEST_HELPER" // value: path of a JSON helperConfig
	testPATH        = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	pollInterval    = 20 * time.Millisecond
	generousTimeout = 20 * time.Second
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == GuardianArg {
		os.Exit(GuardianMain())
	}
	if len(os.Args) > 1 && os.Args[1] == hungGuardianArg {
		os.Exit(hungGuardianMain())
	}
	if len(os.Args) > 3 && os.Args[1] == deafGuardianArg {
		os.Exit(deafGuardianMain(os.Args[2], os.Args[3] == "mute"))
	}
	useGuardianProgramFromEnv() // before the helper: it inherits the environment
	if cfg := os.Getenv(helperEnv); cfg != "" {
		os.Exit(runHelper(cfg))
	}
	sigdefault.ForChildren() // commands get SIGHUP and SIGINT as by default, even under nohup
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sigdefault.Relay))
}

// helperConfig tells a helper process what to Run, one command after another.
type helperConfig struct {
	Runs            []helperRun `json:"runs"`
	GuardianPIDFile string      `json:"guardian_pid_file"` // BeforeStart writes the guardian's PID
	ResultFile      string      `json:"result_file"`       // one helperResult JSON line per run
	// PrepareOnly makes the helper prepare a guardian, write its PID to GuardianPIDFile and
	// wait forever without running anything (until it is killed).
	PrepareOnly bool `json:"prepare_only,omitempty"`
}

type helperRun struct {
	Args      []string      `json:"args"`
	KillAfter time.Duration `json:"kill_after"`
}

type helperResult struct {
	Result         Result `json:"result"`
	Err            string `json:"err,omitempty"`
	ForegroundBack bool   `json:"foreground_back"` // stdin's foreground group is ours again
}

// runHelper is the helper process's main: it runs each command with its own stdio and
// records the results. It returns the process exit code.
func runHelper(cfgPath string) int {
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 3
	}
	var cfg helperConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 3
	}
	if cfg.PrepareOnly {
		p, err := prepare(Spec{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 3
		}
		if err := os.WriteFile(cfg.GuardianPIDFile, []byte(strconv.Itoa(p.g.pid)), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 3
		}
		select {} // until killed
	}
	out, err := os.OpenFile(cfg.ResultFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 3
	}
	defer func() { _ = out.Close() }()
	for _, hr := range cfg.Runs {
		path, err := Resolve(hr.Args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 3
		}
		stop := testStop
		if hr.KillAfter > 0 {
			stop.KillAfter = hr.KillAfter
		}
		res, err := run(context.Background(), Spec{
			Path: path, Args: hr.Args, Env: []string{testPATH},
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
			stop: stop,
			BeforeStart: func(gpid int) error {
				if cfg.GuardianPIDFile == "" {
					return nil
				}
				return os.WriteFile(cfg.GuardianPIDFile, []byte(strconv.Itoa(gpid)), 0o600)
			},
		})
		hres := helperResult{Result: res, ForegroundBack: inForeground(os.Stdin)}
		if err != nil {
			hres.Err = err.Error()
		}
		line, _ := json.Marshal(hres)
		if _, err := out.Write(append(line, '\n')); err != nil {
			return 3
		}
	}
	return 0
}

// writeHelperConfig stores cfg in dir and returns the environment entry that starts a helper.
func writeHelperConfig(t *testing.T, dir string, cfg helperConfig) string {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := dir + "/helper.json"
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return helperEnv + "=" + p
}

// readHelperResults reads the results a helper wrote.
func readHelperResults(t *testing.T, path string) []helperResult {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []helperResult
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r helperResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad helper result %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// waitFor polls cond until it holds or timeout passes, then fails the test with what
// (polltest.Until, the tests' one polling helper).
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	polltest.Until(t, timeout, what, cond)
}

// waitPIDFile polls until path holds a PID and returns it.
func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, generousTimeout, "a pid in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 0
	})
	return pid
}

// snapshotProc records a running process, so that alive can tell it from a later PID reuse.
func snapshotProc(t *testing.T, pid int) procEntry {
	t.Helper()
	p, err := readProcStat(pid)
	if err != nil {
		t.Fatalf("process %d is not running: %v", pid, err)
	}
	return p
}

// alive reports whether the snapshotted process still runs (a zombie counts as gone).
func alive(p procEntry) bool {
	now, err := readProcStat(p.pid)
	return err == nil && now.start == p.start && now.state != 'Z'
}

// pidExists reports whether any process (zombies aside) has this PID.
func pidExists(pid int) bool {
	p, err := readProcStat(pid)
	return err == nil && p.state != 'Z'
}

// runSh runs script with sh through Run, with stdout to a file whose content it returns.
func runSh(ctx context.Context, t *testing.T, script string, mod func(*Spec)) (Result, string, error) {
	t.Helper()
	outPath := t.TempDir() + "/stdout"
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Close() }()
	path, err := Resolve("sh")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{stop: testStop, Path: path, Args: []string{"sh", "-c", script}, Env: []string{testPATH},
		Stdout: out, Stderr: os.Stderr}
	if mod != nil {
		mod(&spec)
	}
	res, runErr := run(ctx, spec)
	data, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(data), runErr
}

// errBoom is a hook failure for tests.
var errBoom = errors.New("boom")

// testStop is the stop timing of a Plan of default Options (StartPlan), which the package's
// tests give the specs they run without a Plan; a test changes the fields it needs.
var testStop = effectiveTiming(Options{})
