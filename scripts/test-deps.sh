#!/usr/bin/env bash
# Install what the tests need on a Debian 12 machine (root), idempotently and
# quickly when it is all there: Debian packages for the real-systemd tests
# (nspawn, mmdebstrap) and the packaging tests (lintian, rpm, man-db, zsh,
# bash-completion, and the checkers rpmlint, shellcheck and piuparts), and the cached root filesystem of the test nodes. (nfpm,
# which builds the .deb and .rpm, is a tool dependency in go.mod: `go tool nfpm`.)
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
pkgs=(systemd-container mmdebstrap git make ca-certificates lintian rpm man-db zsh bash-completion nftables rpmlint shellcheck piuparts)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "== apt-get install ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# (not inside echo's $(...): set -e would not see mkrootfs.sh fail)
rootfs=$(bash tests/vm/mkrootfs.sh | tail -1)
echo "== root filesystem for the systemd test nodes: $rootfs"
