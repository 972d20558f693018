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
	sema, unitrun, cmd, conn := mod+"/sema", mod+"/unitrun", mod+"/cmd/", mod+"/internal/etcdconn"
	who := mod + "/internal/who"
	// the libraries, with their tests: neither reaches the other, nor the CLI; the connection
	// package reaches none of them (it may link go-flags, for its INI parser only: it reads
	// the config file with it, D9c; the CLI parses the flags and hands Resolve the values);
	// the listings (who) render sema's, and know no child and no systemd (the CLI passes in
	// how a scope is named)
	// the classification of etcd's errors that sema and the connection share, and the names
	// of file kinds that the listings and the connection share, are leaves: they reach no
	// package of ours
	// the check that a watch stream still answers, which the recipe and the listing's follow
	// share, and the tests' polling helper, are leaves too; so is the key schema with its
	// records (sema/schema), which the recipe writes and every layer reads
	etcderr := mod + "/internal/etcderr"
	for leaf, sharers := range map[string]string{etcderr: "sema, who and etcdconn", mod + "/internal/filekind": "who and etcdconn",
		mod + "/sema/schema":          "sema and every layer over it",
		mod + "/internal/watchstream": "sema and who", mod + "/internal/polltest": "the tests of every package"} {
		for _, dep := range goList(t, "list", "-test", "-deps", leaf) {
			if strings.HasPrefix(dep, mod+"/") && !strings.HasPrefix(dep, leaf) {
				t.Errorf("%s imports %s: it is a leaf that %s share", leaf, dep, sharers)
			}
		}
	}
	slotrunPkg, fleetPkg, fleetlockPkg := mod+"/internal/slotrun", mod+"/internal/fleet", mod+"/internal/fleetlock"
	for pkg, banned := range map[string][]string{sema: {unitrun, cmd, who, slotrunPkg, fleetPkg, fleetlockPkg}, unitrun: {sema, cmd, who, fleetPkg}, conn: {sema, unitrun, cmd, who, fleetPkg},
		who: {unitrun, cmd, mod + "/internal/systemd", fleetPkg}} {
		for _, dep := range goList(t, "list", "-test", "-deps", pkg) {
			for _, b := range banned {
				if dep == b || (strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b)) {
					t.Errorf("%s imports %s (directly or through another package): sema, unitrun and etcdconn never import each other (etcdconn none of them) or cmd, sema none of the layers above it (who, fleet, slotrun, fleetlock); who imports none of unitrun, internal/systemd, fleet or cmd", pkg, dep)
				}
			}
		}
	}
	// the systemd plumbing, with its tests: below unitrun, so it reaches no package of ours
	// but the test helpers, and no etcd (the guardian links it)
	sd := mod + "/internal/systemd"
	for _, dep := range goList(t, "list", "-test", "-deps", sd) {
		if dep == sema || dep == unitrun || dep == conn || strings.HasPrefix(dep, cmd) || strings.HasPrefix(dep, "go.etcd.io/") {
			t.Errorf("%s imports %s (directly or through another package): the systemd plumbing knows no semaphore, child, etcd or CLI", sd, dep)
		}
	}
	// the run (D7e): it wires sema to unitrun, and reaches neither the CLI nor the connection
	// package (the caller connects)
	slotrun := mod + "/internal/slotrun"
	for _, dep := range goList(t, "list", "-test", "-deps", slotrun) {
		if strings.HasPrefix(dep, cmd) || dep == conn {
			t.Errorf("%s imports %s (directly or through another package): the run knows sema, unitrun and the systemd plumbing, not the CLI or how to connect", slotrun, dep)
		}
	}
	// the fleet rules (D13-D16): over sema, for the run, the CLI's administration and the
	// FleetLock server alike; they run no child and know no systemd, listing, connection or
	// CLI, nor the layers that use them
	for _, dep := range goList(t, "list", "-test", "-deps", fleetPkg) {
		if dep == unitrun || dep == slotrunPkg || dep == sd || dep == who || dep == conn || dep == fleetlockPkg || strings.HasPrefix(dep, cmd) {
			t.Errorf("%s imports %s (directly or through another package): the fleet rules know sema only, not the run, systemd, the listings, the connection, the FleetLock server or the CLI", fleetPkg, dep)
		}
	}
	// the FleetLock server (D19): a protocol over sema and the listings; it runs no child
	// and knows no CLI or systemd (the CLI tells the service manager)
	fl := mod + "/internal/fleetlock"
	for _, dep := range goList(t, "list", "-test", "-deps", fl) {
		if dep == unitrun || dep == slotrun || dep == sd || strings.HasPrefix(dep, cmd) {
			t.Errorf("%s imports %s (directly or through another package): the FleetLock server knows sema and the listings, not the run, systemd or the CLI", fl, dep)
		}
	}
	// every package of the module but cmd/conch and the run: not both (test files may:
	// tests/vm drives the whole program end to end)
	for _, pkg := range goList(t, "list", mod+"/...") {
		if pkg == mod+"/cmd/conch" || pkg == slotrun || pkg == sema || pkg == unitrun { // (checked above)
			continue
		}
		deps := goList(t, "list", "-deps", pkg)
		if slices.Contains(deps, sema) && slices.Contains(deps, unitrun) {
			t.Errorf("%s imports both sema and unitrun: only the run (internal/slotrun) and cmd/conch wire them", pkg)
		}
	}
}

// cmd/conch is flags, messages, the exit mapping and the wiring: the connection's plumbing
// (gRPC, its logger, protobuf) belongs to internal/etcdconn, so the CLI imports none of it.
func TestThinCLI(t *testing.T) {
	mod := goList(t, "list", "-m")[0]
	for _, imp := range goList(t, "list", "-f", `{{join .Imports "\n"}}`, mod+"/cmd/conch") {
		for _, banned := range []string{"google.golang.org/grpc", "go.uber.org/zap", "google.golang.org/protobuf", "go.etcd.io/etcd/api/"} {
			if strings.HasPrefix(imp, banned) {
				t.Errorf("cmd/conch imports %s: connection plumbing belongs to internal/etcdconn", imp)
			}
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
