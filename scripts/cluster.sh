#!/usr/bin/env bash
# cluster.sh: three systemd nodes on this machine to try conch by hand (make cluster).
#
#   cluster.sh up               boot nodes n1 n2 n3 (systemd-nspawn, Debian 12), each with a
#                               member of a 3-member etcd and the .deb of `make package`
#                               installed, every example unit in /etc/systemd/system (none
#                               enabled; docs/cluster.md walks through each) with demo jobs
#                               behind them, /etc/conch/conch.conf pointing at the three
#                               members, `man conch` and bash completion
#   cluster.sh shell NODE       a login shell in NODE (n1, n2 or n3), as a service of the node
#   cluster.sh run NODE CMD...  run CMD in NODE as a transient service; its status is passed on.
#                               The arguments reach CMD as given: no shell and no systemd
#                               expansion ($ is passed on as $); for a shell, run sh -c '...'
#   cluster.sh powerloss NODE   cut NODE's power: SIGKILL everything in it, disk (overlay) kept
#   cluster.sh boot NODE        boot NODE again after a power loss or a `systemctl reboot` or
#                               `poweroff` in it (a node stays down until then), on the same disk
#   cluster.sh status           the nodes, and `conch sema --who` from the first one alive
#   cluster.sh down             stop every node, remove their disks, cgroups and network
#
# Root only; needs systemd-nspawn, ip and the nodes' root filesystem (scripts/test-deps.sh).
# Each cluster has its own name (CONCH_CLUSTER, default conch-cluster-<random>), used for its
# directory (/var/tmp/NAME), network namespaces (NAME-br, NAME-n1...) and cgroups
# (conch-cluster/NAME-n1...), so several can run at once and nothing else is touched. `up`
# writes the name to .cluster at the root of the tree, where the other commands find it
# unless CONCH_CLUSTER is set. A failed `up` removes what it made.
#
# Network: one namespace per node, joined by a bridge in a namespace of its own, addresses
# 10.77.0.11-13/24 that exist only inside those namespaces; the nodes have no route out.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

nodes=(n1 n2 n3)
subnet=10.77.0
cgparent=conch-cluster

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

cluster_name() {
	if [ -n "${CONCH_CLUSTER:-}" ]; then
		echo "$CONCH_CLUSTER"
	elif [ -s .cluster ]; then
		cat .cluster
	else
		die "no cluster: start one with make cluster (or cluster.sh up)"
	fi
}

ip_of() { echo "$subnet.1${1#n}"; }

# cgroup_dirs MACHINE: the node's cgroup in the unified hierarchy and, on hybrid hosts, in
# name=systemd: each container must start from cgroups of its own in both, or two
# containers share one payload tree and their systemds fight.
cgroup_dirs() {
	local h
	for h in /sys/fs/cgroup/unified /sys/fs/cgroup; do
		if [ -f "$h/cgroup.controllers" ]; then
			echo "$h/$cgparent/$1"
			break
		fi
	done
	[ -f /sys/fs/cgroup/systemd/tasks ] && echo "/sys/fs/cgroup/systemd/$cgparent/$1"
	return 0
}

# init_pid NODE: the PID of the node's systemd (PID 1 of its own PID namespace), or nothing.
init_pid() {
	local f
	f=$dir/$1/init
	[ -s "$f" ] || return 0
	local pid
	pid=$(cat "$f")
	[ -e "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] && echo "$pid"
	return 0
}

need_init() {
	local pid
	pid=$(init_pid "$1")
	[ -n "$pid" ] || die "node $1 is not running (cluster.sh boot $1)"
	echo "$pid"
}

# prepare NODE DEB ETCD ROOTFS: the node's disk, an overlay over the shared read-only root
# filesystem, with the package installed (dpkg --root: conch has no maintainer scripts), an
# etcd member as a unit, conch.conf naming the three members, the example units and two
# demo jobs.
prepare() {
	local n=$1 deb=$2 etcd=$3 rootfs=$4 d m ip peers="" eps="" x
	d=$dir/$n
	m=$d/merged
	ip=$(ip_of "$n")
	for x in "${nodes[@]}"; do
		peers+="${peers:+,}$x=http://$(ip_of "$x"):2380"
		eps+="${eps:+,}http://$(ip_of "$x"):2379"
	done
	mkdir -p "$d/upper" "$d/work" "$m"
	mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$d/upper,workdir=$d/work" "$m"
	echo "$n" >"$m/etc/hostname"
	# localhost as every Debian host has it (the root filesystem has no /etc/hosts: Debian's
	# Prometheus, for one, scrapes localhost:9090 by default), then the three nodes
	{
		printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n'
		for x in "${nodes[@]}"; do echo "$(ip_of "$x") $x"; done
	} >>"$m/etc/hosts"
	cp "$deb" "$m/var/tmp/conch.deb"
	dpkg --root="$m" --force-not-root -i "$m/var/tmp/conch.deb" >/dev/null
	sed -i "s|^# endpoints = .*|endpoints = $eps|" "$m/etc/conch/conch.conf"
	grep -q "^endpoints = $eps\$" "$m/etc/conch/conch.conf" || die "$n: cannot set endpoints in /etc/conch/conch.conf"
	install -m 0755 "$etcd" "$m/usr/local/bin/etcd"
	cat >"$m/etc/systemd/system/cluster-etcd.service" <<-EOF
		[Unit]
		Description=etcd member $n of the try-out cluster $name
		[Service]
		# exec, not notify: a member is ready only with a quorum, and the node must finish
		# booting before the others have started
		Type=exec
		ExecStart=/usr/local/bin/etcd --name $n --data-dir /var/lib/etcd \\
		  --listen-peer-urls http://$ip:2380 --initial-advertise-peer-urls http://$ip:2380 \\
		  --listen-client-urls http://$ip:2379,http://127.0.0.1:2379 --advertise-client-urls http://$ip:2379 \\
		  --initial-cluster $peers --initial-cluster-state new --initial-cluster-token $name \\
		  --heartbeat-interval 50 --election-timeout 500 --log-level warn
		Restart=on-failure
		RestartSec=1s
		[Install]
		WantedBy=multi-user.target
	EOF
	mkdir -p "$m/etc/systemd/system/multi-user.target.wants"
	ln -sf ../cluster-etcd.service "$m/etc/systemd/system/multi-user.target.wants/cluster-etcd.service"
	# every example unit, none enabled (docs/cluster.md enables them one feature at a time)
	cp "$m"/usr/share/doc/conch/examples/*.service "$m"/usr/share/doc/conch/examples/*.timer "$m/etc/systemd/system/"
	mkdir -p "$m/usr/local/sbin" "$m/var/lib/prometheus/node-exporter"
	printf '#!/bin/sh\necho "maintenance on $(hostname), fencing token $CONCH_REV"\nsleep "${MAINTENANCE_SECONDS:-20}"\necho "maintenance on $(hostname) done"\n' >"$m/usr/local/sbin/node-maintenance"
	printf '#!/bin/sh\necho "batch-worker on $(hostname), fencing token $CONCH_REV"\nwhile :; do sleep 5; echo "batch-worker on $(hostname) working"; done\n' >"$m/usr/local/bin/batch-worker"
	printf '#!/bin/sh\necho "ha-job on $(hostname), fencing token $CONCH_REV"\nsleep "${HA_JOB_SECONDS:-5}"\necho "ha-job on $(hostname) done"\n' >"$m/usr/local/sbin/ha-job"
	chmod 0755 "$m/usr/local/sbin/node-maintenance" "$m/usr/local/bin/batch-worker" "$m/usr/local/sbin/ha-job"
}

# boot_node NODE: start systemd-nspawn from fresh cgroups in the node's network namespace,
# and wait until its systemd runs.
boot_node() {
	local n=$1 d machine cg procs=() self pid
	d=$dir/$n
	machine=$name-$n
	for cg in $(cgroup_dirs "$machine"); do
		mkdir -p "$cg"
		procs+=("$cg/cgroup.procs")
	done
	# The shell moves itself into the node's cgroups, then becomes systemd-nspawn.
	SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 setsid /bin/sh -c 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"' sh \
		"${procs[@]}" -- systemd-nspawn --quiet --boot --register=no --keep-unit --link-journal=no \
		--resolv-conf=off --timezone=off --console=pipe --directory="$d/merged" --machine="$machine" \
		--network-namespace-path="/run/netns/$name-$n" </dev/null >>"$d/nspawn.log" 2>&1 &
	# Its init: PID 1 of another PID namespace, running systemd, in the node's cgroup (right
	# after launch nspawn's child is still in this namespace).
	self=$(readlink /proc/self/ns/pid)
	for _ in $(seq 600); do
		pids=$(find "${procs[0]%/cgroup.procs}" -name cgroup.procs -exec cat {} + 2>/dev/null) || true
		for pid in $pids; do
			[ "$(readlink "/proc/$pid/ns/pid" 2>/dev/null)" != "$self" ] || continue
			[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] || continue
			awk '/^NSpid:/ { exit !($NF == 1) }' "/proc/$pid/status" 2>/dev/null || continue
			echo "$pid" >"$d/init"
			break 2
		done
		sleep 0.1
	done
	pid=$(init_pid "$n")
	[ -n "$pid" ] || die "$n did not boot: $(tail -5 "$d/nspawn.log")"
	# The boot is over when the boot target is reached (every unit of the boot started), not
	# only when systemd's job queue is empty: a queued standby (conch-worker.service) keeps
	# it busy, and `is-system-running` says "starting", for as long as it waits for a slot.
	# Until the node's bus is up, systemctl fails at once: ask again, for 120 s at most.
	echo "$n: waiting for its systemd to reach default.target (120 s at most)" >&2
	local state="" since=$SECONDS
	while ((SECONDS - since < 120)); do
		state=$(nsenter -t "$pid" -a systemctl is-system-running 2>/dev/null) || true
		case $state in running | degraded) return 0 ;; esac
		if nsenter -t "$pid" -a systemctl is-active -q default.target 2>/dev/null; then
			[ "$state" = starting ] && echo "$n: default.target reached; still starting: $(nsenter -t "$pid" -a systemctl list-jobs --no-legend --plain 2>/dev/null | awk '{print $2}' | tr '\n' ' ')" >&2
			return 0
		fi
		sleep 0.2
	done
	die "$n: default.target not reached within 120 s (systemd says: ${state:-not answering}); jobs: $(nsenter -t "$pid" -a systemctl list-jobs --no-legend --plain 2>/dev/null | head -5 | tr '\n' ';') nspawn: $(tail -5 "$d/nspawn.log")"
}

# kill_node NODE: SIGKILL everything in the node's cgroups (its power goes), remove them.
kill_node() {
	local machine=$name-$1 cg
	for cg in $(cgroup_dirs "$machine"); do
		[ -d "$cg" ] || continue
		[ -f "$cg/cgroup.kill" ] && echo 1 >"$cg/cgroup.kill" 2>/dev/null
		for _ in $(seq 200); do
			pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)
			[ -z "$pids" ] && break
			# shellcheck disable=SC2086
			kill -9 $pids 2>/dev/null || true
			sleep 0.05
		done
		find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	rm -f "$dir/$1/init"
	rm -rf "/run/systemd/nspawn/propagate/$machine"
}

network_up() {
	local n
	ip netns add "$name-br"
	ip -n "$name-br" link set lo up
	ip -n "$name-br" link add br0 type bridge
	ip -n "$name-br" link set br0 up
	for n in "${nodes[@]}"; do
		ip netns add "$name-$n"
		ip -n "$name-br" link add "$n" type veth peer name host0 netns "$name-$n"
		ip -n "$name-br" link set "$n" master br0 up
		ip -n "$name-$n" link set lo up
		ip -n "$name-$n" addr add "$(ip_of "$n")/24" dev host0
		ip -n "$name-$n" link set host0 up
	done
}

# wait_etcd: until conch in n1 gets an answer from etcd (--who: 1 for "empty", 69 unreachable).
wait_etcd() {
	local rc
	for _ in $(seq 120); do
		rc=0
		run_in n1 conch sema --who >/dev/null 2>&1 || rc=$?
		[ "$rc" -ne 69 ] && return 0
		sleep 0.5
	done
	die "etcd did not answer within a minute"
}

# run_in NODE CMD...: CMD as a transient service of the node (a process started with nsenter
# alone would stay in this machine's cgroup, and conch's scopes need the node's own). systemd
# expands $VAR and ${VAR} in a service's command line from the service's environment: each $
# is doubled ($$ is systemd's literal $), so CMD gets its arguments as they were given.
run_in() {
	local n=$1 pid
	shift
	pid=$(need_init "$n")
	nsenter -t "$pid" -a systemd-run --quiet --wait --pipe --collect --service-type=exec \
		-p "WorkingDirectory=/root" -E HOME=/root -- "${@//\$/\$\$}"
}

cmd_up() {
	[ "$(id -u)" = 0 ] || die "run as root"
	command -v systemd-nspawn >/dev/null || die "systemd-nspawn missing (scripts/test-deps.sh installs it)"
	local deb etcd rootfs began n
	began=$(date +%s%N)
	deb=${CONCH_CLUSTER_DEB:-$(ls -t dist/conch_*_amd64.deb 2>/dev/null | head -1)}
	etcd=${CONCH_CLUSTER_ETCD:-bin/etcd}
	[ -f "$deb" ] || die "no .deb: run make package (make cluster does)"
	[ -x "$etcd" ] || die "no $etcd: run make etcd (make cluster does)"
	rootfs=$(bash tests/vm/mkrootfs.sh | tail -1)
	name=${CONCH_CLUSTER:-conch-cluster-$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')}
	dir=/var/tmp/$name
	[ -e "$dir" ] && die "$dir exists: cluster $name is up already (cluster.sh down first)"
	mkdir -p "$dir"
	[ -n "${CONCH_CLUSTER_KEEP:-}" ] || trap 'echo "cluster.sh: up failed, removing $name" >&2; cmd_down >/dev/null 2>&1' ERR EXIT
	[ -n "${CONCH_CLUSTER:-}" ] || echo "$name" >.cluster
	network_up
	for n in "${nodes[@]}"; do prepare "$n" "$deb" "$etcd" "$rootfs"; done
	for n in "${nodes[@]}"; do boot_node "$n"; done
	wait_etcd
	trap - ERR EXIT
	echo "cluster $name up in $((($(date +%s%N) - began) / 1000000)) ms: nodes ${nodes[*]} ($subnet.11-13), etcd on each, $(basename "$deb") installed"
	echo "shell: make cluster-shell NODE=n1 (or scripts/cluster.sh shell n1); power loss: scripts/cluster.sh powerloss n2; stop: make cluster-down"
}

cmd_down() {
	local n cg
	for n in "${nodes[@]}"; do
		kill_node "$n"
		if mountpoint -q "$dir/$n/merged" 2>/dev/null; then
			umount "$dir/$n/merged" 2>/dev/null || umount -l "$dir/$n/merged"
		fi
		ip netns del "$name-$n" 2>/dev/null || true
	done
	ip netns del "$name-br" 2>/dev/null || true
	for cg in $(cgroup_dirs ""); do rmdir "$cg" 2>/dev/null || true; done # the parent, once no cluster uses it
	rm -rf "$dir"
	if [ -s .cluster ] && [ "$(cat .cluster)" = "$name" ]; then rm -f .cluster; fi
	echo "cluster $name removed"
}

cmd_status() {
	local n pid first=""
	for n in "${nodes[@]}"; do
		pid=$(init_pid "$n")
		if [ -n "$pid" ]; then
			echo "$n $(ip_of "$n") up (init PID $pid)"
			first=${first:-$n}
		else
			echo "$n $(ip_of "$n") down"
		fi
	done
	[ -n "$first" ] && run_in "$first" conch sema --who || true
}

node_arg() {
	case ${1:-} in n1 | n2 | n3) ;; *) die "name a node: n1, n2 or n3" ;; esac
}

what=${1:-}
[ $# -gt 0 ] && shift
case $what in
up) cmd_up ;;
down | shell | run | powerloss | boot | status)
	name=$(cluster_name)
	dir=/var/tmp/$name
	[ -d "$dir" ] || [ "$what" = down ] || die "cluster $name is not up (no $dir)"
	case $what in
	down) cmd_down ;;
	status) cmd_status ;;
	shell)
		node_arg "${1:-}"
		pid=$(need_init "$1")
		exec nsenter -t "$pid" -a systemd-run --quiet --pty --collect --wait -E "TERM=${TERM:-xterm}" -E HOME=/root -p WorkingDirectory=/root -- /bin/bash -l
		;;
	run)
		node_arg "${1:-}"
		n=$1
		shift
		run_in "$n" "$@"
		;;
	powerloss)
		node_arg "${1:-}"
		kill_node "$1"
		echo "$1: power lost (its disk is kept: cluster.sh boot $1)"
		;;
	boot)
		node_arg "${1:-}"
		[ -z "$(init_pid "$1")" ] || die "$1 is running"
		kill_node "$1" # what a reboot or poweroff inside it left (its cgroups)
		boot_node "$1"
		echo "$1 booted"
		;;
	esac
	;;
*) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
