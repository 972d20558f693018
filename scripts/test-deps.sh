#!/usr/bin/env bash
# Install what the tests need on a Debian 12 machine (root), idempotently and
# quickly when it is all there: Debian packages for the real-systemd tests
# (nspawn, mmdebstrap) and the packaging tests (lintian, rpm, man-db, zsh,
# bash-completion, and the checkers rpmlint, shellcheck and piuparts), promtool for the alert
# rules' tests, and the cached root filesystem of the test nodes. (nfpm,
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
# promtool (tests/docs runs `promtool test rules` and `check metrics`): Debian's prometheus
# package unpacked, not installed, whose postinst would start a Prometheus server.
promdir=/var/cache/conch-test/prometheus
if [ ! -x "$promdir/usr/bin/promtool" ]; then
	echo "== promtool: Debian's prometheus package, unpacked into $promdir"
	tmp=$(mktemp -d)
	(cd "$tmp" && { apt-get download -qq prometheus || { apt-get update -qq && apt-get download -qq prometheus; }; }) 2>&1 | grep -v 'Download is performed unsandboxed' || true
	rm -rf "$promdir.new" && mkdir -p "$promdir.new"
	dpkg-deb -x "$tmp"/prometheus_*.deb "$promdir.new"
	rm -rf "$promdir" "$tmp" && mv "$promdir.new" "$promdir"
	"$promdir/usr/bin/promtool" --version | head -1
fi
# (not inside echo's $(...): set -e would not see mkrootfs.sh fail)
rootfs=$(bash tests/vm/mkrootfs.sh | tail -1)
echo "== root filesystem for the systemd test nodes: $rootfs"
