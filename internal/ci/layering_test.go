package ci

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The package layout rule (HELPERS "How we build", design card): sema is the etcd recipe
// and knows no process, unitrun supervises children and knows no etcd, and cmd/conch is
// the only place that wires the two. `make lint` runs this, as depguard would: a bad import
// fails it before review.
func TestLayering(t *testing.T) {
	mod := goList(t, "list", "-m")[0]
	sema, unitrun, cmd := mod+"/sema", mod+"/unitrun", mod+"/cmd/"
	// the libraries, with their tests: neither reaches the other, nor the CLI
	for pkg, banned := range map[string][]string{sema: {unitrun, cmd}, unitrun: {sema, cmd}} {
		for _, dep := range goList(t, "list", "-test", "-deps", pkg) {
			for _, b := range banned {
				if dep == b || (strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b)) {
					t.Errorf("%s imports %s (directly or through another package): sema and unitrun never import each other or cmd", pkg, dep)
				}
			}
		}
	}
	// every package of the module but cmd/conch: not both (test files may: tests/vm drives
	// the whole program end to end)
	for _, pkg := range goList(t, "list", mod+"/...") {
		if pkg == mod+"/cmd/conch" || pkg == sema || pkg == unitrun { // (the two: checked above)
			continue
		}
		deps := goList(t, "list", "-deps", pkg)
		if slices.Contains(deps, sema) && slices.Contains(deps, unitrun) {
			t.Errorf("%s imports both sema and unitrun: only cmd/conch wires them", pkg)
		}
	}
}

// goList runs the go command with args and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}
