#!/usr/bin/env bash
# Trace N hand-offs of `conch sema --max 1` step by step (bench/analysis.md, "where a hand-off's
# milliseconds go"). Run from the repository's root on a copy of the tree:
#   git apply bench/trace/points.patch && make build etcd && go build -o bin/bench-stamp ./bench/stamp
#   bench/trace/handoff.sh [N]
# The patch adds trace points (CONCH_TRACE=1: "T PID CLOCK_MONOTONIC_NS NAME" on stderr) to
# conch, sema, unitrun and the guardian, and bench/rvx (LeaseRevoke against Delete latency).
# Never apply it to a tree you ship. Prints the median, p90 and largest time of each point from the holder's
# child's last instruction, in ms.
set -euo pipefail
n=${1:-15}
work=$(mktemp -d /tmp/conch-trace.XXXXXX)
eval "$(scripts/etcd-local.sh bin/etcd "$work/etcd")"
trap 'kill "$ETCD_PID"' EXIT
export CONCH_ENDPOINTS=$ETCD_ENDPOINT CONCH_TRACE=1
for i in $(seq -w 1 "$n"); do
	d=$work/run$i && mkdir -p "$d"
	name=trace$i-$RANDOM
	bin/conch sema "$name" --max 1 -- bin/bench-stamp "$d/stamps" A 150 2>"$d/A.err" &
	a=$!
	sleep 0.05 # B queues behind A's slot (A holds 150 ms)
	bin/conch sema "$name" --max 1 -- bin/bench-stamp "$d/stamps" B 10 2>"$d/B.err" &
	wait "$a" $!
done
python3 - "$work" <<'PY'
import glob, statistics, sys
at = {}
for d in sorted(glob.glob(sys.argv[1] + "/run*")):
    ev = []
    for side in "AB":
        for line in open(f"{d}/{side}.err"):
            p = line.split()
            if p and p[0] == "T":
                ev.append((int(p[2]), f"{side}:{p[3]}"))
    for line in open(f"{d}/stamps"):
        kind, tag, _, ns = line.split()
        ev.append((int(ns), f"{tag}:stamp-{kind}"))
    t0 = next(t for t, k in ev if k == "A:stamp-E")
    seen = set()
    for t, k in sorted(ev):
        if t >= t0 and k not in seen:
            seen.add(k)
            at.setdefault(k, []).append((t - t0) / 1e6)
for k in sorted(at, key=lambda k: statistics.median(at[k])):
    v = sorted(at[k]); print(f"{k:22s} {statistics.median(v):7.2f} ms  p90 {v[int(len(v)*0.9)]:7.2f} max {v[-1]:7.2f} (n={len(v)})")
PY
