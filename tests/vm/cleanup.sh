#!/usr/bin/env bash
# cleanup.sh: remove the test nodes (internal/systemdtest) that a killed or crashed test binary
# left behind: their processes (SIGKILL through their cgroups), overlay mounts, cgroups and
# directories, and their test networks (network namespaces and the links in them). Nodes and
# networks whose test binary still runs are left alone, so it is safe while other tests run; with --all it removes every node (for .ci/run's EXIT trap, after the tests).
# Idempotent; prints what it removes; exits 0 unless something could not be removed.
set -u
all=0
[ "${1:-}" = --all ] && all=1

alive() { # alive PID STARTTIME: is that very process still running?
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	[ "${20}" = "$2" ] 2>/dev/null
}

hierarchies=()
for h in /sys/fs/cgroup/unified /sys/fs/cgroup /sys/fs/cgroup/systemd; do
	[ -d "$h/conch-test" ] && hierarchies+=("$h/conch-test")
done

kill_node() { # kill_node MACHINE: SIGKILL everything in its cgroups, then rmdir them
	local m=$1 h d
	for h in "${hierarchies[@]}"; do
		d=$h/$m
		[ -d "$d" ] || continue
		[ -f "$d/cgroup.kill" ] && echo 1 >"$d/cgroup.kill" 2>/dev/null
		for _ in $(seq 100); do
			pids=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
			[ -z "$pids" ] && break
			# shellcheck disable=SC2086
			kill -9 $pids 2>/dev/null
			sleep 0.05
		done
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
		[ -d "$d" ] && echo "cleanup.sh: cannot remove cgroup $d" >&2 && rc=1
	done
	rm -rf "/run/systemd/nspawn/propagate/$m"
}

rc=0
declare -A live=()
for dir in /var/tmp/conch-node-*/; do
	[ -d "$dir" ] || continue
	dir=${dir%/}
	m=$(cat "$dir/machine" 2>/dev/null) || m=
	if [ $all = 0 ] && read -r pid start <"$dir/owner" 2>/dev/null && alive "$pid" "$start"; then
		[ -n "$m" ] && live[$m]=1
		continue
	fi
	echo "cleanup.sh: removing node ${m:-?} ($dir)"
	[ -n "$m" ] && kill_node "$m"
	if mountpoint -q "$dir/merged"; then
		umount "$dir/merged" 2>/dev/null || umount -l "$dir/merged" || rc=1
	fi
	mountpoint -q "$dir/merged" || rm -rf "$dir"
done
# Test networks (internal/systemdtest.Network): their namespaces hold every link (veth ports,
# bridge), so deleting the namespaces removes the links too.
for dir in /var/tmp/conch-net-*/; do
	[ -d "$dir" ] || continue
	dir=${dir%/}
	if [ $all = 0 ] && read -r pid start <"$dir/owner" 2>/dev/null && alive "$pid" "$start"; then
		continue
	fi
	echo "cleanup.sh: removing test network $dir"
	while read -r ns; do
		case $ns in conch-*) ;; *) continue ;; esac
		[ -e "/run/netns/$ns" ] || continue
		ip netns del "$ns" || rc=1
	done <"$dir/netns"
	rm -rf "$dir"
done
# Cgroups of nodes whose directory is gone already (older than a minute unless --all: a node
# being booted right now has its cgroups before this script could see its directory).
for h in "${hierarchies[@]}"; do
	for d in "$h"/*/; do
		[ -d "$d" ] || continue
		m=$(basename "$d")
		[ -n "${live[$m]:-}" ] && continue
		[ $all = 0 ] && [ -z "$(find "$d" -maxdepth 0 -mmin +1)" ] && continue
		echo "cleanup.sh: removing cgroups of node $m"
		kill_node "$m"
	done
done
# Clusters of tests/scripts' TestClusterScript (scripts/cluster.sh, named conch-ct-<pid>)
# whose test process is gone; never a cluster of make cluster (conch-cluster-*).
for dir in /var/tmp/conch-ct-*/; do
	[ -d "$dir" ] || continue
	name=$(basename "$dir")
	pid=${name#conch-ct-}
	[ $all = 0 ] && [ -d "/proc/$pid" ] && continue
	echo "cleanup.sh: removing test cluster $name"
	CONCH_CLUSTER=$name bash "$(dirname "$0")/../../scripts/cluster.sh" down >/dev/null || rc=1
done
exit $rc
