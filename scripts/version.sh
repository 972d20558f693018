#!/bin/sh
# Version for builds and packages: `git describe` on a tagged tree (v1.2.3 ->
# 1.2.3), else 0.0.0~git<date>.<sha>, which is a valid deb and rpm version.
d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null) && { echo "${d#v}" | sed 's/-\([0-9]*\)-g/+git\1./'; exit 0; }
sha=$(git rev-parse --short=8 HEAD 2>/dev/null) || { echo 0.0.0; exit 0; }
date=$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null)
echo "0.0.0~git${date}.${sha}"
