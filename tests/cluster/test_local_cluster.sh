#!/usr/bin/env bash
# test_local_cluster.sh SCRIPT PLUGIN_DIR RCKPT — the local-cluster script on
# a cluster of its own: start twice, stop twice, status when stopped, a
# plugin that fails to load, and nothing touched outside its folder.
set -u
. "$(dirname "$0")/../testlib.sh"
script=$1 plugins=$2 rckpt=$3
if ! command -v ceph-mon >/dev/null; then
	skip_test cluster "Ceph is not installed (./dev.sh test installs it)"
fi
t=$(mktemp -d)
dir=$t/cluster
export HOME=$t/home
mkdir -p "$HOME" "$t/broken"
: >"$t/broken/libcls_rckpt.so"
: >"$t/broken/libcls_pcr.so"
unset CEPH_CONF
cleanup() { "$script" --dir "$dir" stop >/dev/null 2>&1; rm -rf "$t"; }
trap cleanup EXIT
outside() { ls -la --time-style=+%s /etc/ceph /var/lib/ceph /var/log/ceph /run/ceph 2>/dev/null; }
outside >"$t/before"
# No process of ours left (a function: 'bash -c' would match its own pattern).
none_left() { ! pgrep -f -- "-c $dir/ceph.conf"; }

check "status before any start: exit 3" expect_run 3 "$t/o" "$script" --dir "$dir" status
check "stop before any start: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" stop
check "bad option: exit 2" expect_run 2 "$t/o" "$script" --dir "$dir" --osds 9 start
check "unknown command: exit 2" expect_run 2 "$t/o" "$script" --dir "$dir" restart
# only addresses that never leave the machine
check "an address off the machine refused: exit 2" expect_run 2 "$t/o" "$script" --dir "$dir" --addr 10.0.0.1 start
check "  says which are allowed" contains "$t/o" "127.0.0.0/8 or 169.254.0.0/16"
check "  nothing created" test ! -e "$dir/ceph.conf"
check "--help: exit 0" expect_run 0 "$t/o" "$script" --help

check "start: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" --plugins "$plugins" start
check "  says it is up" contains "$t/o" "cluster up in"
sed -n 's/.*cluster up in \([0-9.]*\)s.*/first start: \1 s/p' "$t/o"
check "start again: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" --plugins "$plugins" start
check "status: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" status
check "  three daemons run" bash -c "[ \$(grep -c ' running (pid' '$t/o') -eq 3 ]"
check "env prints CEPH_CONF" expect_run 0 "$t/o" "$script" --dir "$dir" env
check "  for this folder" contains "$t/o" "export CEPH_CONF=$dir/ceph.conf"
check "plugins answer" expect_run 0 "$t/o" "$rckpt" --conf "$dir/ceph.conf" status
check "different OSD count refused" expect_run 1 "$t/o" "$script" --dir "$dir" --osds 2 start
check "different address refused" expect_run 1 "$t/o" "$script" --dir "$dir" --addr 127.0.0.2 start
check "  names the one it has" contains "$t/o" "listens on 127.0.0.1"
check "  explains" contains "$t/o" "wipe"

check "stop: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" stop
check "  no daemon left" none_left
check "stop again: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" stop
check "  says nothing runs" contains "$t/o" "no daemon running"
check "status when stopped: exit 3" expect_run 3 "$t/o" "$script" --dir "$dir" status
check "  three daemons stopped" bash -c "[ \$(grep -c ' stopped$' '$t/o') -eq 3 ]"

# A plugin file the OSD cannot load: the client says so, at once.
check "start with broken plugins: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" --plugins "$t/broken" start
check "status reports both plugins missing: exit 1" expect_run 1 "$t/o" "$rckpt" --conf "$dir/ceph.conf" --timeout 20 status
check "  rckpt MISSING" grep -q '^plugin *rckpt *MISSING' "$t/o"
check "  pcr MISSING" grep -q '^plugin *pcr *MISSING' "$t/o"
# a refusal, not the client's 20 s timeout running out (how fast is not a
# test's to judge on 2 shared cores)
check "  refused, not timed out" bash -c "! grep -qi 'timed out' '$t/o'"
check "bench refuses without the plugins: exit 1" expect_run 1 "$t/o" "$rckpt" --conf "$dir/ceph.conf" --timeout 20 bench --quick --out "$t/bench"
check "  names the rckpt plugin" contains "$t/o" "do not run the rckpt plugin"
check "  names the pcr plugin" contains "$t/o" "do not run the pcr plugin"
check "  writes no report" test ! -e "$t/bench"
check "stop: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" stop

outside >"$t/after"
check "nothing outside its folder changed" diff "$t/before" "$t/after"
check "HOME untouched" test -z "$(ls -A "$HOME")"
check "wipe: exit 0" expect_run 0 "$t/o" "$script" --dir "$dir" wipe
check "  folder gone" test ! -e "$dir"
finish
