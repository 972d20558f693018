#!/bin/sh
# package.sh [OUTDIR]: build conch and its packages into OUTDIR (default dist):
#   conch_<version>_amd64.deb and conch-<version>.x86_64.rpm
# from nfpm.yaml, with the man page generated from the binary (conch --man-page). The
# version is $VERSION, else scripts/version.sh. nfpm is a tool dependency in go.mod
# (`go tool nfpm`, pinned like etcd): nothing to install but Go itself.
# SOURCE_DATE_EPOCH (default: the last commit's time) fixes the dates in the man page
# and the changelog, so two runs on the same commit build the same files.
set -eu
cd "$(dirname "$0")/.."
out=${1:-dist}
version=${VERSION:-$(scripts/version.sh)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

stage=$(mktemp -d "${TMPDIR:-/tmp}/conch-package.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# Static (no libc or loader dependency: packaging/deb/lintian-overrides says why), stripped
# (Debian strips binaries), no build paths in the binary.
# conch-guardian (D7a) gets the same BUILD_ID as conch (from make; else both fall back on the
# VCS revision of a clean tree), or conch will not trust it.
ldflags="-s -w -X main.version=$version -X github.com/conch-project/conch/unitrun.buildID=${BUILD_ID:-}"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "$ldflags" -o "$stage/conch" ./cmd/conch
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "$ldflags" -o "$stage/conch-guardian" ./cmd/conch-guardian
"$stage/conch" --man-page | gzip -9n >"$stage/conch.1.gz"

# A native Debian package needs a changelog; this one names the commit it was built from.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
maintainer=$(sed -n 's/^maintainer: *//p' nfpm.yaml)
{
	echo "conch ($version) unstable; urgency=medium"
	echo
	echo "  * Built from commit $commit."
	echo
	echo " -- $maintainer  $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.gz"

# The .rpm's %changelog, the same entry in nfpm's changelog format (chglog). nfpm takes the
# changelog for both packagers, and would add a changelog.Debian.gz beside the native
# package's changelog.gz: it goes only into the .rpm's configuration.
{
	echo "- semver: \"$version-1\"" # nfpm gives the .rpm release 1
	echo "  date: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
	echo "  packager: \"$maintainer\""
	echo "  changes:"
	echo "    - note: \"Built from commit $commit.\""
} >"$stage/changelog.yml"
{
	cat nfpm.yaml
	echo "changelog: $stage/changelog.yml"
} >"$stage/nfpm-rpm.yaml"

mkdir -p "$out"
export CONCH_VERSION="$version" CONCH_STAGE="$stage"
go tool nfpm package --config nfpm.yaml --packager deb --target "$out/conch_${version}_amd64.deb" >&2
go tool nfpm package --config "$stage/nfpm-rpm.yaml" --packager rpm --target "$out/conch-${version}.x86_64.rpm" >&2
echo "$out/conch_${version}_amd64.deb"
echo "$out/conch-${version}.x86_64.rpm"
