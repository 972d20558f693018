package packaging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rpmBaseDirs stand in for the filesystem package of an RPM distribution, which owns the
// base system's directories; everything else the .rpm puts on disk it must own itself, so
// that `rpm -e` removes it.
var rpmBaseDirs = []string{"/etc", "/usr/bin", "/usr/libexec", "/usr/share/man/man1", "/usr/share/doc", "/usr/share/licenses", "/var/lib/rpm"}

// rpmDB is the rpm database inside the scratch root: passed explicitly (Debian's rpm
// defaults to ~/.rpmdb) and left out of the file lists (it changes with every transaction).
const rpmDB = "/var/lib/rpm"

// scratchRPM is an empty root for `rpm --root`: no RPM distribution is needed to check what
// the .rpm does to a system's files.
type scratchRPM struct {
	t    *testing.T
	ctx  context.Context
	root string
}

// rpm runs rpm on the scratch root and fails the test when it exits non-zero.
func (s *scratchRPM) rpm(args ...string) string {
	s.t.Helper()
	out, _, err := run(s.ctx, nil, append([]string{"rpm", "--root", s.root, "--dbpath", rpmDB}, args...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *scratchRPM) files() fileList {
	s.t.Helper()
	return hostFileList(s.t, s.root, rpmDB)
}

func (s *scratchRPM) read(path string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, path))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// rpmPayload lists what a .rpm installs, with kinds: `rpm -qp` of FILEMODES and FILENAMES.
func rpmPayload(t *testing.T, ctx context.Context, pkg string) fileList {
	t.Helper()
	out, _, err := run(ctx, nil, "rpm", "-qp", "--qf", `[%{FILEMODES:perms} %{FILENAMES}\n]`, pkg)
	if err != nil {
		t.Fatal(err)
	}
	l := fileList{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		perms, path, ok := strings.Cut(line, " ")
		if !ok || len(perms) != 10 {
			t.Fatalf("rpm -qp line %q", line)
		}
		l[path] = permsKind(perms)
	}
	return l
}

// permsKind turns ls-style permissions ("drwxr-xr-x") into a fileList kind ("d 755").
func permsKind(perms string) string {
	k := "f"
	switch perms[0] {
	case 'd':
		k = "d"
	case 'l':
		k = "l"
	}
	var mode int
	for i, c := range perms[1:] {
		if c != '-' {
			mode |= 1 << (8 - i)
		}
	}
	return fmt.Sprintf("%s %o", k, mode)
}

// The .rpm in a scratch root: installing adds exactly its payload (it owns every directory
// it creates outside the base system's), erasing removes all of it; an upgrade replaces the
// version, keeps an edited %config(noreplace) file as it is, and after the erase that file
// is all that is left, as conch.conf.rpmsave (rpm's policy for edited configuration).
func TestRPMInstallUpgradeErase(t *testing.T) {
	needTool(t, "rpm", "rpm")
	needNextPackages(t)
	s := &scratchRPM{t: t, ctx: testContext(t, 5*time.Minute), root: t.TempDir()}
	for _, d := range rpmBaseDirs {
		if err := os.MkdirAll(filepath.Join(s.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.rpm("--initdb")
	before := s.files()
	payload, nextPayload := rpmPayload(t, s.ctx, built.rpm), rpmPayload(t, s.ctx, next.rpm)

	// A clean install and erase leave the root as it was.
	s.rpm("-i", built.rpm)
	if d := before.plus(payload).diff(s.files()); d != "" {
		t.Errorf("after rpm -i, the root is not the base plus the payload:\n%s", d)
	}
	if got, want := strings.TrimSpace(s.rpm("-q", "conch")), "conch-"+built.version+"-1.x86_64"; got != want {
		t.Errorf("rpm -q conch = %q, want %q", got, want)
	}
	s.rpm("-V", "conch") // every file as packaged
	s.rpm("-e", "conch")
	if d := before.diff(s.files()); d != "" {
		t.Errorf("rpm -e left files behind (or removed some):\n%s", d)
	}

	// Install, edit the configuration as an admin does, upgrade.
	s.rpm("-i", built.rpm)
	conf := s.read("/etc/conch/conch.conf") + "\n[etcd]\nendpoints = 127.0.0.1:1\n"
	if err := os.WriteFile(filepath.Join(s.root, "etc/conch/conch.conf"), []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	s.rpm("-U", next.rpm)
	if got, want := strings.TrimSpace(s.rpm("-q", "conch")), "conch-"+next.version+"-1.x86_64"; got != want {
		t.Errorf("after rpm -U, rpm -q conch = %q, want %q", got, want)
	}
	if d := before.plus(nextPayload).diff(s.files()); d != "" {
		t.Errorf("after rpm -U, the root is not the base plus the new payload:\n%s", d)
	}
	if got := s.read("/etc/conch/conch.conf"); got != conf {
		t.Errorf("rpm -U replaced the edited /etc/conch/conch.conf:\n%s", got)
	}
	if out, _, err := run(s.ctx, nil, filepath.Join(s.root, "usr/bin/conch"), "--version"); err != nil || strings.TrimSpace(out) != "conch "+next.version {
		t.Errorf("after rpm -U, conch --version = %q (%v), want conch %s", out, err, next.version)
	}

	// Erase: only the edited configuration stays, saved aside.
	s.rpm("-e", "conch")
	kept := fileList{"/etc/conch": "d 755", "/etc/conch/conch.conf.rpmsave": "f 640"}
	if d := before.plus(kept).diff(s.files()); d != "" {
		t.Errorf("after erasing an upgraded package with an edited configuration:\n%s", d)
	}
	if got := s.read("/etc/conch/conch.conf.rpmsave"); got != conf {
		t.Errorf("conch.conf.rpmsave is not the edited configuration:\n%s", got)
	}
}
