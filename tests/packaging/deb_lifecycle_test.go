package packaging

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/conch-project/conch/internal/systemdtest"
)

// nodeListScript lists a node's files as fileList lines ("d 755 /etc"), staying on the root
// filesystem and leaving out what changes by itself or is dpkg's own bookkeeping: dpkg's
// database and logs (policy: dpkg keeps its log, and the package's entries are checked
// through dpkg-query instead), caches, /var/tmp (where the test puts the packages) and the
// running systemd's state.
const nodeListScript = `find / -xdev \( -path /var/lib/dpkg -o -path /var/log -o -path /var/cache \
	-o -path /var/tmp -o -path /var/lib/systemd \) -prune -o -printf '%y %m %p\n'`

// files returns the node's file list (nodeListScript).
func (n *node) files() fileList {
	n.t.Helper()
	l := fileList{}
	for _, line := range strings.Split(strings.TrimSpace(n.sh(nodeListScript)), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		perm, path, ok := strings.Cut(rest, " ")
		if !ok || path == "/" {
			continue
		}
		l[path] = kind + " " + perm
	}
	return l
}

// debPayload lists what a .deb installs, with kinds, from dpkg-deb --contents.
func debPayload(t *testing.T, ctx context.Context, pkg string) fileList {
	t.Helper()
	out, _, err := run(ctx, nil, "dpkg-deb", "--contents", pkg)
	if err != nil {
		t.Fatal(err)
	}
	l := fileList{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || len(f[0]) != 10 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		if path != "" {
			l[path] = permsKind(f[0])
		}
	}
	return l
}

// status returns dpkg's view of the conch package ("install ok installed 1.2.3"), or "" when
// dpkg knows nothing of it.
func (n *node) status() string {
	n.t.Helper()
	res, err := n.Nsenter(n.ctx, "dpkg-query", "-W", "-f", "${Status} ${Version}", "conch")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(res.Stdout))
}

// The .deb in a node, through dpkg as an admin uses it: install adds exactly its payload,
// an upgrade to a newer build keeps the edited conffile and the file list, remove leaves
// only the conffile (policy), and purge leaves the node's files as they were before the
// install, with nothing of conch in dpkg's database.
func TestDebInstallUpgradePurge(t *testing.T) {
	needNextPackages(t)
	ctx := testContext(t, fleetTimeout)
	n := &node{Node: systemdtest.Boot(t, systemdtest.Options{Name: "pkglife"}), t: t, ctx: ctx}
	for path, pkg := range map[string]string{"/var/tmp/conch-1.deb": built.deb, "/var/tmp/conch-2.deb": next.deb} {
		data, err := os.ReadFile(pkg)
		if err != nil {
			t.Fatal(err)
		}
		n.write(path, string(data), 0o644)
	}
	payload, nextPayload := debPayload(t, ctx, built.deb), debPayload(t, ctx, next.deb)
	before := n.files()
	t.Logf("node %s: %d paths before the install, %d in the .deb", n.Name(), len(before), len(payload))
	if _, ok := before["/etc/conch"]; ok {
		t.Fatalf("the node has /etc/conch before the install")
	}

	n.must("dpkg", "-i", "/var/tmp/conch-1.deb")
	if got := n.status(); got != "install ok installed "+built.version {
		t.Fatalf("after dpkg -i: %q", got)
	}
	if d := before.plus(payload).diff(n.files()); d != "" {
		t.Errorf("after dpkg -i, the node is not as before plus the payload:\n%s", d)
	}

	conf := n.sh("cat /etc/conch/conch.conf") + "\n[etcd]\nendpoints = 127.0.0.1:1\n"
	n.write("/etc/conch/conch.conf", conf, 0o640)
	n.must("dpkg", "-i", "/var/tmp/conch-2.deb")
	if got := n.status(); got != "install ok installed "+next.version {
		t.Fatalf("after the upgrade: %q", got)
	}
	if got := strings.TrimSpace(n.must("conch", "--version")); got != "conch "+next.version {
		t.Errorf("after the upgrade, conch --version = %q", got)
	}
	if d := before.plus(nextPayload).diff(n.files()); d != "" {
		t.Errorf("after the upgrade, the node is not as before plus the new payload (no .dpkg-new or .dpkg-old either):\n%s", d)
	}
	if got := n.sh("cat /etc/conch/conch.conf"); got != conf {
		t.Errorf("the upgrade replaced the edited conffile:\n%s", got)
	}

	n.must("dpkg", "--remove", "conch")
	if got := n.status(); got != "deinstall ok config-files "+next.version {
		t.Errorf("after dpkg --remove: %q", got)
	}
	kept := fileList{"/etc/conch": "d 755", "/etc/conch/conch.conf": "f 640"}
	if d := before.plus(kept).diff(n.files()); d != "" {
		t.Errorf("after dpkg --remove, the node is not as before plus the conffile:\n%s", d)
	}

	n.must("dpkg", "--purge", "conch")
	if got := n.status(); got != "" && !strings.HasPrefix(got, "unknown ok not-installed") {
		t.Errorf("after dpkg --purge, dpkg-query says %q", got)
	}
	if d := before.diff(n.files()); d != "" {
		t.Errorf("dpkg --purge left files behind (or removed some):\n%s", d)
	}
	if left := n.sh("ls /var/lib/dpkg/info/ | grep '^conch\\.' || true"); left != "" {
		t.Errorf("dpkg --purge left conch's entries in /var/lib/dpkg/info:\n%s", left)
	}
}
