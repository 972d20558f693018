#!/usr/bin/env bash
# Run every fuzz target (func Fuzz*) of the given packages for FUZZTIME each, after its seed
# corpus in testdata/fuzz. A crash writes its input under testdata/fuzz: commit it,
# it is then a regular test case.
#
# Go 1.26's fuzzing coordinator can report its own -fuzztime deadline as a failure, a bare
# "context deadline exceeded" with no failing input, when a loaded machine is slow to stop
# its workers (Go issue 75804, fixed in Go 1.27). Such a run is not a finding: this script
# then replays the target's corpus as a regular test, which must pass, and goes on. Any other
# failure, a written input above all, fails the run.
# Usage: scripts/fuzz.sh FUZZTIME PKG...
set -uo pipefail
fuzztime=$1
shift
go=${GO:-go}
for pkg in "$@"; do
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$pkg"/*_test.go | cut -c6-); do
		out=$("$go" test -run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" "$pkg" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		[ "$rc" -eq 0 ] && continue
		if ! grep -q 'Failing input written\|^panic:' <<<"$out" && grep -qx '    context deadline exceeded' <<<"$out"; then
			echo "fuzz: $f: the coordinator's own -fuzztime deadline (Go issue 75804), no failing input: replaying the corpus"
			"$go" test -count=1 -run "^$f\$" "$pkg" || exit 1
			continue
		fi
		exit 1
	done
done
