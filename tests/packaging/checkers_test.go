package packaging

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/systemdtest"
)

// The distributions' own checkers, as scripts/check-packages.sh (make check-packages, run by
// .ci/run) runs them: rpmlint finds no error in the .rpm (its filters, each with a reason, in
// packaging/rpm/conch.rpmlintrc), lintian --pedantic no error or warning in the .deb,
// shellcheck -S warning nothing in the tree's scripts, and piuparts installs, removes and
// purges the .deb cleanly in a copy of the test nodes' Debian 12 root filesystem.
func TestDistributionCheckers(t *testing.T) {
	needPackages(t)
	for _, c := range []struct{ checker, tool, pkg string }{
		{"rpmlint", "rpmlint", "rpmlint"},
		{"lintian", "lintian", "lintian"},
		{"shellcheck", "shellcheck", "shellcheck"},
		{"piuparts", "piuparts", "piuparts"},
	} {
		t.Run(c.checker, func(t *testing.T) {
			needTool(t, c.tool, c.pkg)
			ctx := testContext(t, 5*time.Minute)
			script := filepath.Join(systemdtest.ModuleRoot(), "scripts", "check-packages.sh")
			out, errOut, err := run(ctx, nil, script, c.checker, built.dir)
			t.Logf("check-packages.sh %s:\n%s%s", c.checker, out, errOut)
			if err != nil {
				t.Errorf("%s: %v", c.checker, err)
			}
		})
	}
}

// The .rpm lists its documentation as such (%doc: `rpm --excludedocs` leaves it out) and has
// a %changelog naming the commit it was built from.
func TestRPMDocsAndChangelog(t *testing.T) {
	needPackages(t)
	needTool(t, "rpm", "rpm")
	ctx := testContext(t, time.Minute)
	flags, _, err := run(ctx, nil, "rpm", "-qp", "--qf", `[%{FILENAMES} %{FILEFLAGS:fflags}\n]`, built.rpm)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/usr/share/man/man1/conch.1.gz", "/usr/share/doc/conch/README.md", "/usr/share/doc/conch/examples/conch-worker.service"} {
		if !strings.Contains(flags, f+" d\n") {
			t.Errorf("%s is not %%doc:\n%s", f, flags)
		}
	}
	log, _, err := run(ctx, nil, "rpm", "-qp", "--changelog", built.rpm)
	if err != nil || !strings.Contains(log, built.version+"-1") || !strings.Contains(log, "Built from commit ") {
		t.Errorf("rpm --changelog: %q (%v)", log, err)
	}
}
