// Package packaging tests what conch ships and how it behaves under systemd, on real parts
// only: the .deb and .rpm that scripts/package.sh builds (`make package`) are checked with
// lintian, dpkg-deb and rpm; the man page is rendered with man(1); the completion scripts
// are loaded in bash and zsh; and the .deb is installed with dpkg into Debian 12 nodes that
// boot a real systemd (internal/systemdtest), where the example units from
// contrib/systemd run against a real etcd (internal/etcdtest) and the tests read
// `systemctl status` and `journalctl` as an operator would (D10).
//
// The .rpm is also installed, upgraded and erased with `rpm --root` in a scratch root, and
// the .deb installed, upgraded, removed and purged in a node, comparing file lists before
// and after each step.
//
// The tools come from apt (lintian, rpm, man-db, zsh, bash-completion, systemd-container;
// scripts/test-deps.sh installs them); nfpm is a tool dependency in go.mod (`go tool
// nfpm`). Without CI a missing tool skips the test that needs it, saying how to
// get it; with CI=true it fails the test.
package packaging
