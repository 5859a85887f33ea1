#!/usr/bin/env bash
# test_cli_status.sh RCKPT CAPS-SCRIPT — `rckpt status` and `rckpt call`
# against the cluster named by CEPH_CONF; status by users who may only read
# (issue 30 item 6): on a fresh pool, on one with objects, and limited to
# one job. Exit 77 (skipped) without a cluster, unless
# RCKPT_REQUIRE_CLUSTER=1.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
caps=$2
need_cluster
t=$(mktemp -d)
id=$$
fresh=fresh-$id
job=status-$id
cleanup() {
	if command -v ceph >/dev/null; then
		ceph auth del "client.r-pool-$id" >/dev/null 2>&1
		ceph auth del "client.r-job-$id" >/dev/null 2>&1
		ceph osd pool delete "$fresh" "$fresh" --yes-i-really-really-mean-it >/dev/null 2>&1
	fi
	"$rckpt" ckpt rm --job "$job" >/dev/null 2>&1
	rm -rf "$t"
}
trap cleanup EXIT
v=$("$rckpt" version | sed -n 's/^librckpt \([0-9.]*\).*/\1/p')

check "status exits 0" expect_run 0 "$t/o" "$rckpt" status
check "  names the cluster" grep -qE '^cluster +[0-9a-f-]{36}$' "$t/o"
check "  names the pool" grep -qE '^pool +rckpt$' "$t/o"
check "  rckpt plugin answers with this version" grep -qE "^plugin +rckpt +$v +built for Ceph .+ formats cls-wire 1\.\.1" "$t/o"
check "  pcr plugin answers with this version" grep -qE "^plugin +pcr +$v +built for Ceph .+ formats cls-wire 1\.\.1" "$t/o"
check "  nothing is stale" bash -c "! grep -q STALE '$t/o'"
check "  every up OSD answers for both (issue 30 item 6)" grep -qE "^osd\.[0-9]+ +rckpt +$v +pcr +$v$" "$t/o"
check "  and says all do" grep -qE "^osds +all [0-9]+ up OSDs answer for both plugins at this version$" "$t/o"
check "status --format json" expect_run 0 "$t/o.json" "$rckpt" --format json status
check "  both plugins ok, at this version" /usr/bin/python3 -c "
import json; s = json.load(open('$t/o.json'))
assert [(p['name'], p['state'], p['version']) for p in s['plugins']] == [('rckpt', 'ok', '$v'), ('pcr', 'ok', '$v')], s
assert s['osds'] and all(o[c]['state'] == 'ok' and o[c]['version'] == '$v' for o in s['osds'] for c in ('rckpt', 'pcr')), s"

check "missing method: exit 1" expect_run 1 "$t/o" "$rckpt" call rckpt no_such_method
check "  says so" contains "$t/o" "no such class or method"
check "  in one line" lines "$t/o" 1
check "class not loaded: exit 1" expect_run 1 "$t/o" "$rckpt" call no_such_class version
check "  points at the load list" contains "$t/o" "osd class load list"
check "method error passes through" expect_run 1 "$t/o" "$rckpt" call --input junk rckpt version
check "  as EINVAL" contains "$t/o" "Invalid argument"
check "call prints the reply" expect_run 0 "$t/o" "$rckpt" call pcr version
check "  frame magic first" grep -q '^00000000  52 4b 01 01 01 00' "$t/o"
check "missing pool: exit 1" expect_run 1 "$t/o" "$rckpt" --pool no-such-pool status
check "  names it" contains "$t/o" "pool 'no-such-pool' does not exist"

# Users who may only read. Their keyrings live here, named by a conf of
# their own.
command -v ceph >/dev/null || { echo "(no ceph CLI: the readers' cases are not run)"; finish; exit; }
mkdir -p "$t/keyring"
sed '/^[[:space:]]*keyring[[:space:]]*=/d' "$CEPH_CONF" >"$t/ceph.conf"
sed -i "0,/^\[global\]/s||[global]\n\tkeyring = $t/keyring/\$name.keyring|" "$t/ceph.conf"
as() { local u=$1; shift; CEPH_CONF=$t/ceph.conf "$rckpt" --id "$u" "$@"; }
ceph osd pool create "$fresh" 8 8 replicated --size 1 >/dev/null 2>&1 ||
	ceph osd pool create "$fresh" 8 8 replicated >/dev/null 2>&1
ceph osd pool application enable "$fresh" rckpt >/dev/null 2>&1
u=r-pool-$id
check "a reader of a fresh pool" expect_run 0 "$t/o" ceph auth get-or-create "client.$u" mon 'allow r' osd "allow r class-read pool=$fresh" -o "$t/keyring/client.$u.keyring"
check "reader's status on the fresh pool: exit 1" expect_run 1 "$t/o" as "$u" -p "$fresh" status
check "  each plugin UNKNOWN, not MISSING" bash -c "[ \$(grep -c '^plugin .*UNKNOWN: no object of the pool to call it on' '$t/o') -eq 2 ] && ! grep -q MISSING '$t/o'"
check "  says how to make the probe objects" contains "$t/o" "rckpt status\` once, as client.admin"
check "  names the OSDs not asked" grep -qE '^osds +not asked, no object this user may call on: osd\.[0-9]+' "$t/o"
check "  no refusal" bash -c "! grep -q 'not permitted' '$t/o'"
check "  wrote nothing" test -z "$(rados -p "$fresh" ls 2>&1)"
check "  JSON: state unknown" bash -c "as() { CEPH_CONF=$t/ceph.conf '$rckpt' --id $u \"\$@\"; }; as -p $fresh --format json status >'$t/j'; [ \$? = 1 ] && /usr/bin/python3 -c \"
import json; s = json.load(open('$t/j'))
assert [p['state'] for p in s['plugins']] == ['unknown', 'unknown'], s
assert all(o[c]['state'] == 'unknown' for o in s['osds'] for c in ('rckpt', 'pcr')), s\""
rados -p "$fresh" put some-object "$t/ceph.conf"
check "once the pool holds an object: exit 0" expect_run 0 "$t/o" as "$u" -p "$fresh" status
check "  the OSD serving it answers for both" grep -qE "^osd\.[0-9]+ +rckpt +$v +pcr +$v$" "$t/o"
check "  the reader still wrote nothing" test "$(rados -p "$fresh" ls)" = some-object
check "the admin's status makes probe objects" expect_run 0 "$t/o" "$rckpt" -p "$fresh" status
check "  rckpt.probe.N" bash -c "rados -p '$fresh' ls | grep -q '^rckpt\.probe\.[0-9]*$'"
rados -p "$fresh" rm some-object
check "on them, the reader's status: exit 0" expect_run 0 "$t/o" as "$u" -p "$fresh" status
check "  every OSD answers" grep -qE "^osds +all [0-9]+ up OSDs answer for both plugins at this version$" "$t/o"

# a reader of one job: the pool's probes are not its to read
u=r-job-$id
if [ -d "${RCKPT_TEST_CKPT_DIR:-}" ]; then
	ck=$(model_files "$RCKPT_TEST_CKPT_DIR" | head -1)
	check "a job of one step" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "$ck"
	check "a reader of that job" expect_run 0 "$t/o" "$caps" -o "$t/keyring/client.$u.keyring" reader "$u" "$job"
	check "its status of the pool: exit 1" expect_run 1 "$t/o" as "$u" status
	check "  not asked, not refused" grep -qE '^osds +not asked, no object this user may call on: osd\.[0-9]+' "$t/o"
	check "  points at --job" contains "$t/o" "pass --job/--dataset"
	check "status --job JOB: exit 0" expect_run 0 "$t/o" as "$u" status --job "$job"
	check "  the OSDs serving the job answer" grep -qE "^osd\.[0-9]+ +rckpt +$v +pcr +$v$" "$t/o"
	check "status --job of a missing job: exit 1" expect_run 1 "$t/o" "$rckpt" status --job "no-such-$id"
	check "  says it does not exist" contains "$t/o" "job 'no-such-$id' does not exist"
else
	echo "(no real checkpoints: the job reader's cases are not run)"
fi
check "--job and --dataset together: exit 2" expect_run 2 "$t/o" "$rckpt" status --job a --dataset b
check "status --job needs a value: exit 2" expect_run 2 "$t/o" "$rckpt" status --job
check "  names it" contains "$t/o" "option '--job' needs a value"
finish
