package packaging

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/ci"
	"github.com/conch-project/conch/internal/sigdefault"
	"github.com/conch-project/conch/internal/systemdtest"
)

// buildTimeout bounds scripts/package.sh: a cold go build of conch and of nfpm (a tool
// dependency in go.mod, `go tool nfpm`) on a busy 2-core machine, plus two nfpm runs (under
// a second each).
const buildTimeout = 10 * time.Minute

// built is what TestMain built once for all tests: the packages and the .deb's files
// extracted on the host.
var built struct {
	err     error  // why there are no packages (a missing tool or a failed build)
	missing bool   // err is a missing prerequisite, not a failure
	dir     string // output directory of package.sh
	version string // scripts/version.sh
	deb     string
	rpm     string
	root    string // the .deb extracted with dpkg-deb -x
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() { // building and checking packages is not in the -short tier
		fmt.Fprintln(os.Stderr, "packaging: skipped under -short")
		os.Exit(0)
	}
	sigdefault.ForChildren() // what the tests start gets default signal dispositions
	dir, err := os.MkdirTemp("", "conch-packages-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	buildPackages(dir)
	if built.err == nil {
		fmt.Fprintf(os.Stderr, "packaging: built %s and %s in %v\n", filepath.Base(built.deb), filepath.Base(built.rpm), time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPackages runs scripts/package.sh into dir/dist and extracts the .deb into dir/root,
// recording the outcome in built.
func buildPackages(dir string) {
	root := systemdtest.ModuleRoot()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		built.err, built.missing = fmt.Errorf("dpkg-deb not found (apt-get install dpkg)"), true
		return
	}
	out, err := exec.Command("sh", filepath.Join(root, "scripts", "version.sh")).Output()
	if err != nil {
		built.err = fmt.Errorf("scripts/version.sh: %w", err)
		return
	}
	built.version = strings.TrimSpace(string(out))
	built.dir = filepath.Join(dir, "dist")
	built.deb, built.rpm, err = runPackageScript(built.dir, built.version)
	if err != nil {
		built.err = err
		return
	}
	built.root = filepath.Join(dir, "root")
	if out, err := exec.Command("dpkg-deb", "-x", built.deb, built.root).CombinedOutput(); err != nil {
		built.err = fmt.Errorf("dpkg-deb -x %s: %w: %s", built.deb, err, out)
	}
}

// runPackageScript runs scripts/package.sh with VERSION=version into dir and returns the
// .deb and .rpm it names on stdout; an error carries the script's stderr.
func runPackageScript(dir, version string) (deb, rpm string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	root := systemdtest.ModuleRoot()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "scripts", "package.sh"), dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION="+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("scripts/package.sh: %w\n%s", err, stderr.Bytes())
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.HasSuffix(p, ".deb"):
			deb = p
		case strings.HasSuffix(p, ".rpm"):
			rpm = p
		}
	}
	if deb == "" || rpm == "" {
		return "", "", fmt.Errorf("scripts/package.sh named no .deb or no .rpm: %q", out)
	}
	return deb, rpm, nil
}

// next is a second build of the packages, with a higher version than built's (built.version
// + "+next", greater for both dpkg and rpm), for the upgrade tests; built on first use.
var next struct {
	once     sync.Once
	err      error
	version  string
	deb, rpm string
}

// needNextPackages builds the upgrade's packages once (into built.dir's sibling "next").
func needNextPackages(t *testing.T) {
	t.Helper()
	needPackages(t)
	next.once.Do(func() {
		next.version = built.version + "+next"
		next.deb, next.rpm, next.err = runPackageScript(filepath.Join(filepath.Dir(built.dir), "next"), next.version)
	})
	if next.err != nil {
		t.Fatalf("cannot build the upgrade's packages: %v", next.err)
	}
}

// needPackages stops the test when TestMain could not build the packages.
func needPackages(t *testing.T) {
	t.Helper()
	switch {
	case built.err == nil:
	case built.missing:
		ci.Unavailable(t, "%v", built.err)
	default:
		t.Fatalf("cannot build the packages: %v", built.err)
	}
}

// needTool stops the test when an apt tool is missing.
func needTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		ci.Unavailable(t, "%s not found; install it with: apt-get install --no-install-recommends %s", tool, pkg)
	}
	return p
}

// run runs argv on the host and returns stdout and stderr; a failure to start or a non-zero
// exit is returned as an error carrying stderr.
func run(ctx context.Context, env []string, argv ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = env
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("%q: %w: %s", argv, err, e.String())
	}
	return o.String(), e.String(), nil
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
