#!/usr/bin/env bash
# Start a throw-away single-node etcd on a free loopback port, in the
# background, for the demo and the benchmarks. Prints two lines:
#   ETCD_PID=<pid of the etcd we started>
#   ETCD_ENDPOINT=http://127.0.0.1:<port>
# Usage: scripts/etcd-local.sh ETCD_BINARY DATA_DIR [extra etcd flags...]
# Never assumes 2379 is free; checks that the etcd we started is the one
# answering. Stop it with: kill "$ETCD_PID".
#
# DATA_DIR is created if missing, or taken if empty; either way the script
# leaves a marker file in it (.etcd-local) and later runs reuse such a
# directory, replacing only what the script put there (data/, etcd.log). A
# non-empty directory without the marker is refused (exit 2): the script never
# deletes what it did not create.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: $0 ETCD_BINARY DATA_DIR [extra etcd flags...]" >&2
	exit 2
fi
etcd=$1 dir=$2
etcdctl=$(dirname "$etcd")/etcdctl
shift 2
marker=.etcd-local
if [ -e "$dir" ] && [ ! -d "$dir" ]; then
	echo "$0: $dir exists and is not a directory; give a new or empty directory" >&2
	exit 2
fi
if [ -d "$dir" ] && [ ! -e "$dir/$marker" ] && [ -n "$(ls -A "$dir")" ]; then
	echo "$0: $dir is not empty and was not made by this script (no $marker in it); give a new or empty directory" >&2
	exit 2
fi
mkdir -p "$dir"
echo "made by scripts/etcd-local.sh: data/ and etcd.log in here are replaced at each run" >"$dir/$marker"
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 12000)) # below Linux's ephemeral range (32768-60999)
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "no free port found" >&2
	return 1
}
for attempt in 1 2 3 4 5; do
	cport=$(free_port) pport=$(free_port)
	rm -rf "${dir:?}/data" "$dir/etcd.log" # ours: the marker says this script made them
	"$etcd" --name demo --data-dir "$dir/data" \
		--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "demo=http://127.0.0.1:$pport" --log-level error "$@" >"$dir/etcd.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		if ! kill -0 "$pid" 2>/dev/null; then break; fi # exited: port taken?
		if "$etcdctl" --endpoints "127.0.0.1:$cport" --dial-timeout 1s endpoint health >/dev/null 2>&1 &&
			kill -0 "$pid" 2>/dev/null; then
			echo "ETCD_PID=$pid"
			echo "ETCD_ENDPOINT=http://127.0.0.1:$cport"
			exit 0
		fi
		sleep 0.1
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	echo "etcd did not come up on port $cport (attempt $attempt); log:" >&2
	tail -5 "$dir/etcd.log" >&2 || true
done
exit 1
