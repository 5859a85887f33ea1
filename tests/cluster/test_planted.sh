#!/usr/bin/env bash
# test_planted.sh TEST_PLANTED CAPS-SCRIPT CMOCKA-RUN — test_planted.c run as
# a trainer of its own namespace (ceph-conf/rckpt-caps.sh: plain rwx on it),
# so that what it plants is what any trainer can write with plain RADOS
# writes. Exit 77 (skipped) without a cluster, the ceph CLI, or the local
# cluster's OSD pid file beside CEPH_CONF.
set -u
. "$(dirname "$0")/../testlib.sh"
prog=$1
caps=$2
run=$3
need_cluster
command -v ceph >/dev/null || skip_test cluster "no ceph CLI (ceph-common; ./dev.sh test installs it)"
pidfile=$(dirname "$CEPH_CONF")/run/osd.0.pid
[ -r "$pidfile" ] || skip_test cluster "no OSD pid file at $pidfile (not the local cluster)"
t=$(mktemp -d)
id=$$
job=planted-$id
u=t-planter-$id
cleanup() {
	ceph auth del "client.$u" >/dev/null 2>&1
	rm -rf "$t"
}
trap cleanup EXIT
mkdir -p "$t/keyring"
sed '/^[[:space:]]*keyring[[:space:]]*=/d' "$CEPH_CONF" >"$t/ceph.conf"
sed -i "0,/^\[global\]/s||[global]\n\tkeyring = $t/keyring/\$name.keyring|" "$t/ceph.conf"
"$caps" -o "$t/keyring/client.$u.keyring" trainer "$u" "$job" >/dev/null 2>&1 ||
	{ echo "test_planted.sh: cannot make the trainer user $u" >&2; exit 1; }
CEPH_CONF=$t/ceph.conf RCKPT_TEST_CLIENT=$u RCKPT_TEST_NS=$job RCKPT_TEST_OSD_PID=$(tr -dc 0-9 <"$pidfile") \
	bash "$run" "$prog"
