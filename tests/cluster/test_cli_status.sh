#!/usr/bin/env bash
# test_cli_status.sh RCKPT — `rckpt status` and `rckpt call` against the
# cluster named by CEPH_CONF. Exit 77 (skipped) without one, unless
# RCKPT_REQUIRE_CLUSTER=1.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
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
finish
