#!/usr/bin/env bash
# local-cluster.sh — a real single-node Ceph cluster on loopback, with the
# rckpt object-class plugins loaded, for development, tests and demos.
#
# Everything lives under one state directory (--dir): config, keyrings, daemon
# data, logs, sockets, pid files. Only processes this script started (recorded
# by PID and checked against their command line) are ever stopped.

set -euo pipefail

prog=$(basename "$0")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

usage() {
	cat <<EOF
usage: $prog [options] start | stop | status | env | wipe

A single-node Ceph cluster on 127.0.0.1 (or --addr): 1 monitor, 1 manager,
N OSDs, cephx on, the rckpt plugins loaded from the build's plugin folder.

commands:
  start    create the cluster on first use, start any daemon not running,
           create the pool, wait until it is usable (idempotent)
  stop     stop the daemons this script started (idempotent)
  status   print each daemon's state; exit 0 if all run, 3 if none, 1 if some
  env      print 'export CEPH_CONF=...' for eval in a shell
  wipe     stop, then delete the state directory

options:
  --dir DIR        state directory      (default: \$RCKPT_CLUSTER_DIR or $repo/build/cluster)
  --plugins DIR    folder holding libcls_rckpt.so and libcls_pcr.so
                   (default: \$RCKPT_PLUGIN_DIR or $repo/build/rados-classes)
  --osds N         OSDs to create, 1..8 (default 1; fixed when the cluster is created)
  --store KIND     memstore (default) or bluestore (on a sparse file in --dir)
  --osd-bytes N    capacity of each OSD's store in bytes (default 4294967296)
  --pool NAME      pool to create (default rckpt)
  --pool-size N    replicas of that pool (default: min(N OSDs, 3))
  --timeout S      seconds to wait for each daemon (default 90)
  --addr A         the daemons' address, loopback (127.0.0.0/8) or link-local
                   (169.254.0.0/16, a veth of this machine: rckpt bench --link)
                   (default 127.0.0.1; fixed when the cluster is created)
  -h, --help       this text
EOF
}

die() { echo "$prog: error: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*; try '$prog --help'" >&2; exit 2; }
say() { echo "$prog: $*"; }

dir=${RCKPT_CLUSTER_DIR:-$repo/build/cluster}
plugins=${RCKPT_PLUGIN_DIR:-$repo/build/rados-classes}
osds=1 store=memstore osd_bytes=4294967296 pool=rckpt pool_size="" timeout=90
cmd="" osds_given=0 store_given=0 addr=127.0.0.1 addr_given=0

while [ $# -gt 0 ]; do
	case "$1" in
	--dir) [ $# -ge 2 ] || usage_error "--dir needs a value"; dir=$2; shift 2 ;;
	--plugins) [ $# -ge 2 ] || usage_error "--plugins needs a value"; plugins=$2; shift 2 ;;
	--osds) [ $# -ge 2 ] || usage_error "--osds needs a value"; osds=$2; osds_given=1; shift 2 ;;
	--store) [ $# -ge 2 ] || usage_error "--store needs a value"; store=$2; store_given=1; shift 2 ;;
	--osd-bytes) [ $# -ge 2 ] || usage_error "--osd-bytes needs a value"; osd_bytes=$2; shift 2 ;;
	--pool) [ $# -ge 2 ] || usage_error "--pool needs a value"; pool=$2; shift 2 ;;
	--pool-size) [ $# -ge 2 ] || usage_error "--pool-size needs a value"; pool_size=$2; shift 2 ;;
	--timeout) [ $# -ge 2 ] || usage_error "--timeout needs a value"; timeout=$2; shift 2 ;;
	--addr) [ $# -ge 2 ] || usage_error "--addr needs a value"; addr=$2; addr_given=1; shift 2 ;;
	-h | --help | help) usage; exit 0 ;;
	start | stop | status | env | wipe)
		[ -z "$cmd" ] || usage_error "one command at a time ('$cmd' and '$1')"
		cmd=$1; shift ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done

[ -n "$cmd" ] || usage_error "missing command"
[[ "$osds" =~ ^[1-8]$ ]] || usage_error "--osds must be 1..8, not '$osds'"
[[ "$timeout" =~ ^[0-9]+$ && "$timeout" -gt 0 ]] || usage_error "--timeout must be a positive integer"
[[ "$osd_bytes" =~ ^[0-9]+$ && "$osd_bytes" -ge 268435456 ]] || usage_error "--osd-bytes must be an integer >= 268435456"
case "$store" in memstore | bluestore) ;; *) usage_error "--store must be memstore or bluestore" ;; esac
[[ "$pool" =~ ^[A-Za-z0-9_.-]+$ ]] || usage_error "--pool '$pool' is not a valid pool name"
# Addresses that never leave the machine: loopback, or link-local on a veth.
[[ "$addr" =~ ^(127|169\.254)(\.([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])){2,3}$ &&
	$(tr -cd . <<<"$addr" | wc -c) -eq 3 ]] ||
	usage_error "--addr must be an IPv4 address in 127.0.0.0/8 or 169.254.0.0/16, not '$addr'"
if [ -n "$pool_size" ]; then
	[[ "$pool_size" =~ ^[1-8]$ ]] || usage_error "--pool-size must be 1..8"
fi

mkdir -p -- "$dir" 2>/dev/null || { [ "$cmd" = start ] && die "cannot create state directory '$dir'"; }
[ ! -d "$dir" ] || dir=$(cd "$dir" && pwd)
conf=$dir/ceph.conf

# ---------------------------------------------------------------- helpers

ceph_cli() { ceph -c "$conf" --connect-timeout 15 "$@"; }

# The daemons of a created cluster, one name a line (mon.a, mgr.x, osd.N).
daemons() {
	[ -f "$conf" ] || return 0
	echo mon.a
	echo mgr.x
	local d
	for d in "$dir"/data/osd.*; do
		[ -d "$d" ] && basename "$d"
	done
	return 0
}

# The PID of daemon $1 if it runs and is ours: its command line must name our
# config file, so a recycled PID is never mistaken for our daemon.
daemon_pid() {
	local pidfile=$dir/run/$1.pid pid
	[ -f "$pidfile" ] || return 1
	pid=$(tr -dc 0-9 2>/dev/null <"$pidfile") || return 1 # it may go as we read
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-c $conf " || return 1
	echo "$pid"
}

show_log() {
	local log=$dir/log/$1.log
	if [ -s "$log" ]; then
		echo "--- last lines of $log:" >&2
		tail -n 25 "$log" >&2
	else
		echo "--- $log is empty or missing" >&2
	fi
}

# Is TCP port $1 free on this machine? Reads /proc so it needs no tools.
port_free() {
	local hex
	hex=$(printf '%04X' "$1")
	! awk -v h=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

pick_mon_port() {
	local p
	for p in $(seq 3300 2 3398); do
		if port_free "$p" && port_free $((p + 1)); then
			echo "$p"
			return 0
		fi
	done
	die "no free pair of TCP ports in 3300..3399 on $addr for the monitor"
}

# Wait until "$@" succeeds, up to $timeout seconds; asks every 0.2 s (a
# daemon is often ready well within a second, and starts add up in the tests).
wait_for() {
	local what=$1 daemon=$2 end=$((SECONDS + timeout))
	shift 2
	while [ "$SECONDS" -lt "$end" ]; do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if [ -n "$daemon" ] && ! daemon_pid "$daemon" >/dev/null; then
			echo "$prog: error: $daemon exited while waiting for $what" >&2
			show_log "$daemon"
			exit 1
		fi
		sleep 0.2
	done
	echo "$prog: error: $what: not within ${timeout}s" >&2
	[ -z "$daemon" ] || show_log "$daemon"
	exit 1
}

# The class folder the OSDs load from. An OSD has one class folder, and the
# stock classes (lock, …) must keep working next to ours, so it is a folder in
# the state directory holding links to the stock classes and to the build's
# plugins: a rebuild is picked up at the next OSD start, nothing is copied.
# Ceph's defaults are asked for with an empty configuration: $CEPH_CONF may
# name this very cluster, whose class folder is the one being rebuilt.
link_classes() {
	local cdir=$dir/rados-classes stock f name
	stock=$(env -u CEPH_CONF ceph-osd -c /dev/null --no-mon-config --show-config-value osd_class_dir 2>/dev/null | tail -n 1)
	mkdir -p "$cdir"
	find "$cdir" -maxdepth 1 -type l -delete
	if [ -d "$stock" ]; then
		for f in "$stock"/libcls_*.so; do
			[ -e "$f" ] && ln -s "$f" "$cdir/"
		done
	fi
	for name in rckpt pcr; do
		f=$plugins/libcls_$name.so
		[ -f "$f" ] || die "plugin $f not found (build first, or pass --plugins DIR)"
		rm -f "$cdir/libcls_$name.so"
		ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$cdir/libcls_$name.so"
	done
}

write_conf() {
	local port=$1 fsid=$2 default_list net=127.0.0.0/8 statfs=""
	# Pacific's memstore keeps its bytes in use in a counter that can drift
	# below zero after GiBs of writes and deletes; the OSD then reads itself
	# as 16 EiB used and refuses every write (failsafe full). Its usage is
	# counted from its placement groups' object bytes instead, against the
	# same capacity (Ceph's own knob for test clusters).
	[ "$store" = memstore ] && statfs="fake statfs for testing = $osd_bytes"
	[[ "$addr" != 169.254.* ]] || net=169.254.0.0/16
	default_list=$(env -u CEPH_CONF ceph-osd -c /dev/null --no-mon-config --show-config-value osd_class_load_list 2>/dev/null | tail -n 1)
	cat >"$conf.tmp" <<EOF
# Written by $prog for the cluster in this folder. Everything it uses is here.
[global]
fsid = $fsid
mon host = [v2:$addr:$port,v1:$addr:$((port + 1))]
public network = $net
public addr = $addr
cluster addr = $addr
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring/\$name.keyring
log file = $dir/log/\$name.log
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
run dir = $dir/run
crash dir = $dir/crash
exporter sock dir = $dir/run
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
# local-cluster-store = $store
# local-cluster-osds = $osds
# local-cluster-addr = $addr

[mon]
mon data = $dir/data/\$name
mon cluster log file = default=$dir/log/\$cluster.\$channel.log cluster=$dir/log/\$cluster.log
mon allow pool delete = true

[mgr]
mgr data = $dir/data/\$name

[osd]
osd data = $dir/data/\$name
osd objectstore = $store
memstore device bytes = $osd_bytes
$statfs
# BlueStore links <osd data>/block to this file, so it lives beside the folder.
bluestore block path = $dir/data/\$name.block
bluestore block create = true
bluestore block size = $osd_bytes
bluestore fsck on mount = false
osd memory target = 939524096
# Pacific's fast shutdown exits without unmounting the store: memstore would
# then lose every placement group at a plain stop.
osd fast shutdown = false
osd class dir = $dir/rados-classes
osd class load list = $default_list rckpt pcr
osd class default list = $default_list rckpt pcr
EOF
	mv "$conf.tmp" "$conf"
}

create_cluster() {
	local port fsid
	command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null &&
		command -v ceph-mgr >/dev/null && command -v ceph-authtool >/dev/null ||
		die "Ceph daemons not installed (Debian: apt-get install ceph-mon ceph-mgr ceph-osd ceph-common)"
	port=$(pick_mon_port)
	fsid=$(cat /proc/sys/kernel/random/uuid)
	say "creating a cluster in $dir (monitor on $addr:$port, $osds $store OSD(s))"
	rm -rf "$dir/data" "$dir/keyring" "$dir/run" "$dir/log"
	mkdir -p "$dir/data/mon.a" "$dir/data/mgr.x" "$dir/keyring" "$dir/run" "$dir/log" "$dir/crash"
	write_conf "$port" "$fsid"

	ceph-authtool --create-keyring "$dir/keyring/mon.a.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool --create-keyring "$dir/keyring/client.admin.keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
	ceph-authtool "$dir/keyring/mon.a.keyring" --import-keyring "$dir/keyring/client.admin.keyring" >/dev/null
	monmaptool --create --fsid "$fsid" --addv a "[v2:$addr:$port,v1:$addr:$((port + 1))]" \
		"$dir/monmap" >/dev/null
	ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring/mon.a.keyring" \
		>"$dir/log/mkfs.log" 2>&1 || { cat "$dir/log/mkfs.log" >&2; die "ceph-mon --mkfs failed"; }
	rm -f "$dir/monmap"
	touch "$dir/data/created"
}

start_daemon() {
	local name=$1 type=${1%%.*} id=${1#*.}
	daemon_pid "$name" >/dev/null && return 0
	"ceph-$type" -c "$conf" -i "$id" >>"$dir/log/$name.out" 2>&1 ||
		{ show_log "$name"; die "$name failed to start"; }
	wait_for "$name to write its pid file" "" daemon_pid "$name"
}

create_osd() {
	local uuid key id
	uuid=$(cat /proc/sys/kernel/random/uuid)
	key=$(ceph-authtool --gen-print-key)
	printf '{"cephx_secret": "%s"}\n' "$key" >"$dir/run/osd-new.json"
	id=$(ceph_cli osd new "$uuid" -i "$dir/run/osd-new.json")
	rm -f "$dir/run/osd-new.json"
	[[ "$id" =~ ^[0-9]+$ ]] || die "'ceph osd new' returned '$id'"
	mkdir -p "$dir/data/osd.$id"
	printf '[osd.%s]\n\tkey = %s\n' "$id" "$key" >"$dir/keyring/osd.$id.keyring"
	if ! ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$uuid" --no-mon-config \
		>"$dir/log/mkfs.osd.$id.log" 2>&1; then
		tail -n 25 "$dir/log/mkfs.osd.$id.log" >&2
		# Undo it all, so that the next start tries afresh.
		ceph_cli osd purge "$id" --yes-i-really-mean-it >/dev/null 2>&1 || true
		rm -rf "$dir/data/osd.$id" "$dir/data/osd.$id.block" "$dir/keyring/osd.$id.keyring"
		die "ceph-osd --mkfs for osd.$id failed"
	fi
}

osds_up() {
	local n
	n=$(ceph_cli osd stat -f json | jq -r '.num_up_osds')
	[ "$n" = "$1" ]
}

pgs_active() {
	ceph_cli pg stat -f json | jq -e '
		(.pg_summary.num_pgs // .num_pgs) as $n |
		[(.pg_summary.num_pg_by_state // .num_pg_by_state)[] |
		 select(.name | test("^active")) | .num] | add == $n' >/dev/null
}

created_osds() { sed -n 's/^# local-cluster-osds = //p' "$conf"; }
created_store() { sed -n 's/^# local-cluster-store = //p' "$conf"; }
created_addr() {
	local a
	a=$(sed -n 's/^# local-cluster-addr = //p' "$conf")
	echo "${a:-127.0.0.1}"
}

cmd_start() {
	local t0 d have size
	t0=$(date +%s.%N)
	if [ -f "$conf" ] && [ -f "$dir/data/created" ]; then
		have=$(created_osds)
		[ "$have" = "$osds" ] || [ "$osds_given" = 0 ] ||
			die "the cluster in $dir was created with $have OSD(s); '$prog --dir $dir wipe' it to change that"
		[ "$(created_store)" = "$store" ] || [ "$store_given" = 0 ] ||
			die "the cluster in $dir uses $(created_store); '$prog --dir $dir wipe' it to change that"
		[ "$(created_addr)" = "$addr" ] || [ "$addr_given" = 0 ] ||
			die "the cluster in $dir listens on $(created_addr); '$prog --dir $dir wipe' it to change that"
		osds=$have
	else
		create_cluster
	fi
	link_classes
	start_daemon mon.a
	wait_for "monitor quorum" mon.a ceph_cli quorum_status
	if [ ! -f "$dir/keyring/mgr.x.keyring" ]; then
		ceph_cli auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
			-o "$dir/keyring/mgr.x.keyring" >/dev/null
	fi
	start_daemon mgr.x
	while [ "$(daemons | grep -c '^osd\.')" -lt "$osds" ]; do
		create_osd
	done
	for d in $(daemons | grep '^osd\.'); do
		start_daemon "$d"
	done
	wait_for "$osds OSD(s) up" "" osds_up "$osds"
	size=${pool_size:-$((osds < 3 ? osds : 3))}
	[ "$size" -le "$osds" ] || die "--pool-size $size needs at least $size OSDs"
	if ! ceph_cli osd pool ls | grep -qx -- "$pool"; then
		ceph_cli osd pool create "$pool" 8 8 replicated --size "$size" >/dev/null 2>&1 ||
			ceph_cli osd pool create "$pool" 8 8 replicated >/dev/null
		ceph_cli osd pool set "$pool" size "$size" --yes-i-really-mean-it >/dev/null 2>&1
		ceph_cli osd pool application enable "$pool" rckpt >/dev/null 2>&1
	fi
	wait_for "placement groups of pool '$pool' active" "" pgs_active
	say "cluster up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s:" \
		"$(daemons | tr '\n' ' ')pool '$pool'"
	say "use it with: export CEPH_CONF=$conf"
}

cmd_stop() {
	local d pid pids="" i
	for d in $(daemons | tac); do
		if pid=$(daemon_pid "$d"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids="$pids $d:$pid"
		fi
	done
	if [ -z "$pids" ]; then
		say "no daemon running in $dir"
		return 0
	fi
	for ((i = 0; i < 150; i++)); do # 30 s
		local alive=""
		for d in $pids; do
			daemon_pid "${d%%:*}" >/dev/null && alive="$alive $d"
		done
		[ -n "$alive" ] || break
		sleep 0.2
	done
	for d in $pids; do
		if pid=$(daemon_pid "${d%%:*}"); then
			echo "$prog: ${d%%:*} (pid $pid) ignored SIGTERM for 30s; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	say "stopped:$(for d in $pids; do printf ' %s' "${d%%:*}"; done)"
}

cmd_status() {
	local d pid n=0 up=0
	if [ ! -f "$conf" ]; then
		say "no cluster in $dir (run '$prog start')"
		return 3
	fi
	for d in $(daemons); do
		n=$((n + 1))
		if pid=$(daemon_pid "$d"); then
			up=$((up + 1))
			printf '%-8s running (pid %s)\n' "$d" "$pid"
		else
			printf '%-8s stopped\n' "$d"
		fi
	done
	if [ "$up" -gt 0 ] && daemon_pid mon.a >/dev/null; then
		ceph_cli health 2>&1 | sed 's/^/health   /' || true
	fi
	echo "conf     $conf"
	[ "$up" -eq "$n" ] && return 0
	[ "$up" -eq 0 ] && return 3
	return 1
}

cmd_env() {
	[ -f "$conf" ] || die "no cluster in $dir (run '$prog start')"
	printf 'export CEPH_CONF=%q\n' "$conf"
}

cmd_wipe() {
	cmd_stop
	[ -f "$conf" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ] ||
		die "$dir does not look like a local-cluster folder (no ceph.conf); not deleting it"
	rm -rf -- "$dir"
	say "deleted $dir"
}

case "$cmd" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
wipe) cmd_wipe ;;
esac
