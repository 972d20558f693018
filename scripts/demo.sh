#!/usr/bin/env bash
# The main job on real input: a throw-away single-node etcd on loopback,
# five jobs contending for `conch sema demo --max 2`, and `--who` printed
# while they run. Everything started here is stopped by PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin
work=$(mktemp -d /tmp/conch-demo.XXXXXX)
eval "$(scripts/etcd-local.sh "$bin/etcd" "$work/etcd")"
cleanup() {
	kill "$ETCD_PID" 2>/dev/null || true
	wait "$ETCD_PID" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export CONCH_ENDPOINTS=$ETCD_ENDPOINT CONCH_CONFIG=/dev/null
echo "etcd (pid $ETCD_PID) at $ETCD_ENDPOINT"
echo "starting 5 jobs: conch sema demo --max 2 -- sh -c 'sleep 2' ..."
pids=()
for i in 1 2 3 4 5; do
	"$bin/conch" sema demo --max 2 -- sh -c "echo \"  job $i: running with fencing token CONCH_REV=\$CONCH_REV\"; sleep 2; echo \"  job $i: done\"" &
	pids+=($!)
	sleep 0.1
done
while :; do
	running=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
	[ "$running" -eq 0 ] && break
	now=$("$bin/conch" sema demo --max 2 --who 2>&1)
	if [ "$now" != "${last-}" ]; then # print a listing only when it changed
		echo "--- conch sema demo --max 2 --who"
		echo "$now"
		last=$now
	fi
	sleep 0.5
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
echo "--- all jobs finished (status $status); --who on the empty semaphore exits 1:"
"$bin/conch" sema demo --max 2 --who || echo "  (exit $?)"
echo "--- --nonblock while a job holds the only slot of a lock:"
"$bin/conch" sema lock --max 1 -- sleep 2 &
lockpid=$!
# wait until it holds (--who exits 0 once a key exists), at most ~10 s
for _ in $(seq 100); do "$bin/conch" sema lock --max 1 --who >/dev/null 2>&1 && break; sleep 0.1; done
"$bin/conch" sema lock --max 1 --nonblock -- echo never || echo "  already running elsewhere (exit $?)"
wait "$lockpid"
exit "$status"
