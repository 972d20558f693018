#!/usr/bin/env bash
# mkrootfs.sh: build (once) the read-only Debian 12 root filesystem that the test nodes boot
# with systemd-nspawn (internal/systemdtest), and print its path on the last line of stdout.
#
#   bash tests/vm/mkrootfs.sh               install the prerequisites (systemd-nspawn,
#                                           mmdebstrap) if missing, build the rootfs if not
#                                           cached, print its path
#   bash tests/vm/mkrootfs.sh --print-path  print the cache path only (no install, no build)
#   bash tests/vm/mkrootfs.sh --no-install  like the default, but fail (exit 3) instead of
#                                           calling apt-get when a prerequisite is missing
#
# Runs as root, without a terminal or stdin (CI=true). The mirror comes from the host's own
# apt configuration (/etc/apt/sources.list.d/debian.sources, else /etc/apt/sources.list): no
# host name is written here. The result is cached in $CONCH_TEST_CACHE (default
# /var/cache/conch-test) under rootfs-<hash of the recipe>, built in a temporary directory and
# renamed into place, so a killed build never leaves a half cache; concurrent runs serialise on
# a lock file. Measured on a 2-core machine: ~20 s cold (plus ~10 s of apt-get the first time),
# a few ms warm.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

suite=bookworm
# Packages inside the nodes. systemd/dbus: the real init and system bus under test;
# dbus-user-session: a user manager with its own bus (scope mode as non-root, D8);
# iproute2, procps, psmisc, util-linux: ip, ps/pgrep, pstree/killall, nsenter/flock inside;
# man-db, bash-completion: `man conch` and conch's completion in the trial cluster's nodes
# (scripts/cluster.sh), as on an operator's host.
packages=systemd,systemd-sysv,dbus,dbus-user-session,iproute2,procps,psmisc,util-linux,man-db,bash-completion
# The unprivileged user created inside the nodes (uid 1000) for tests of --user scopes.
test_user=conch
# Bump when the recipe changes in a way the package list does not show.
recipe_version=2

cache=${CONCH_TEST_CACHE:-/var/cache/conch-test}
hash=$(printf '%s\n' "$suite" "$packages" "$test_user" "$recipe_version" | sha256sum | cut -c1-16)
target=$cache/rootfs-$hash

mode=build
case "${1:-}" in
--print-path) mode=print ;;
--no-install) mode=noinstall ;;
"") ;;
*)
	echo "usage: $0 [--print-path|--no-install]" >&2
	exit 64
	;;
esac

if [ "$mode" = print ]; then
	echo "$target"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "mkrootfs.sh: must run as root (mmdebstrap, systemd-nspawn)" >&2
	exit 1
fi

need_install=0
for cmd in systemd-nspawn mmdebstrap nsenter; do
	command -v "$cmd" >/dev/null 2>&1 || need_install=1
done
if [ "$need_install" = 1 ]; then
	if [ "$mode" = noinstall ]; then
		echo "mkrootfs.sh: systemd-nspawn or mmdebstrap missing; run as root: bash $0" >&2
		exit 3
	fi
	# Without --no-install-recommends systemd-container pulls libnss-mymachines, which edits
	# the host's nsswitch.conf.
	apt-get update -q </dev/null
	apt-get install -y -q --no-install-recommends systemd-container mmdebstrap util-linux </dev/null
fi

if [ -d "$target" ]; then
	echo "$target"
	exit 0
fi

mirror=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
	if [ -s "$f" ]; then
		mirror=$f
		break
	fi
done
if [ -z "$mirror" ]; then
	echo "mkrootfs.sh: no apt sources on this host (looked for /etc/apt/sources.list.d/debian.sources and /etc/apt/sources.list)" >&2
	exit 1
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
# Someone else may have built it while we waited for the lock.
if [ -d "$target" ]; then
	echo "$target"
	exit 0
fi
# Leftovers of killed builds: nobody else builds while we hold the lock.
rm -rf "$cache"/.tmp-rootfs-*

tmp=$cache/.tmp-rootfs-$hash-$$
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp"

start=$(date +%s)
# A fresh machine-id per boot: systemd generates one when /etc/machine-id is empty. No
# /etc/hostname (mmdebstrap copies the host's): each node keeps the host name nspawn gives it,
# its machine name.
mmdebstrap --variant=minbase --include="$packages" \
	--customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/sh '"$test_user" \
	--customize-hook=': > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id" "$1/etc/hostname"' \
	"$suite" "$tmp" "$mirror" </dev/null >&2
mv -T "$tmp" "$target"
trap - EXIT
echo "mkrootfs.sh: built $target in $(($(date +%s) - start)) s" >&2
echo "$target"
