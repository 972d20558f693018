#!/usr/bin/env bash
# check-packages.sh [DIST]: the distributions' own checkers, as their maintainers run them,
# on the packages `make package` wrote to DIST (default dist), and shellcheck on the tree's
# scripts. Exits non-zero on any finding that fails a check:
#   rpmlint   no error (deliberate choices are filtered in packaging/rpm/conch.rpmlintrc,
#             each with its reason; warnings are printed)
#   lintian   --pedantic, no E: and no W: (overrides in packaging/deb/lintian-overrides)
#   ShellCheck at severity warning, over every shell script of the tree
#   piuparts  install, remove and purge the .deb in a copy of the test nodes' Debian 12 root
#             filesystem (tests/vm/mkrootfs.sh), no upgrade test: ~15 s
# One checker alone: check-packages.sh rpmlint|lintian|shellcheck|piuparts [DIST].
# Needs rpmlint, lintian, shellcheck and piuparts (scripts/test-deps.sh installs them), and
# root for piuparts.
set -euo pipefail
cd "$(dirname "$0")/.."
what=all
case ${1:-} in rpmlint | lintian | shellcheck | piuparts) what=$1; shift ;; esac
dist=${1:-dist}

# newest FILE...: the most recently built of the packages (DIST may hold older builds).
newest() { ls -t "$@" | head -1; }

run_rpmlint() {
	local rpm out
	rpm=$(newest "$dist"/conch-*.x86_64.rpm)
	# rpmlint unpacks the .rpm with `rpm2cpio | cpio -id`: its payload has relative names
	# (nfpm v2.48.0 writes ./usr/bin/conch, as rpmbuild does), so no wrapper is needed
	echo "== rpmlint $(basename "$rpm")"
	out=$(rpmlint -r packaging/rpm/conch.rpmlintrc "$rpm" 2>&1) || true
	echo "$out"
	if ! grep -q '^ *1 packages and 0 specfiles checked; 0 errors' <<<"$out" || grep -q ': E: ' <<<"$out"; then
		echo "rpmlint: errors (see above)" >&2
		return 1
	fi
}

run_lintian() {
	local deb out
	deb=$(newest "$dist"/conch_*_amd64.deb)
	echo "== lintian --pedantic $(basename "$deb")"
	out=$(lintian --pedantic --tag-display-limit 0 "$deb" 2>&1) || true
	echo "$out"
	if grep -qE '^[EW]: ' <<<"$out"; then
		echo "lintian: errors or warnings (see above)" >&2
		return 1
	fi
}

run_shellcheck() {
	local scripts
	mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
	echo "== shellcheck -S warning (${#scripts[@]} scripts)"
	shellcheck -S warning "${scripts[@]}"
}

run_piuparts() {
	local deb rootfs mirror tmp
	deb=$(newest "$dist"/conch_*_amd64.deb)
	rootfs=$(bash tests/vm/mkrootfs.sh | tail -1)
	# The mirror of the host's own apt configuration, as mkrootfs.sh reads it.
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[ -n "$mirror" ] || mirror=$(awk '/^deb / { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
	tmp=$(mktemp -d /var/tmp/conch-piuparts.XXXXXX)
	trap 'rm -rf "$tmp"' RETURN
	echo "== piuparts $(basename "$deb")"
	if ! piuparts --existing-chroot="$rootfs" -d bookworm ${mirror:+-m "$mirror"} --no-upgrade-test --tmpdir="$tmp" "$deb" >"$tmp/log" 2>&1; then
		tail -40 "$tmp/log"
		echo "piuparts: failed (see above)" >&2
		return 1
	fi
	grep -E 'PASS|FAIL' "$tmp/log" | tail -3
}

status=0
for c in rpmlint lintian shellcheck piuparts; do
	if [ "$what" = all ] || [ "$what" = "$c" ]; then
		"run_$c" || status=1
	fi
done
exit $status
