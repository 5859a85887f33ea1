#!/usr/bin/env bash
# test_enable_classes.sh SCRIPT — ceph-conf/enable-classes.sh against the
# cluster named by CEPH_CONF (issue 30 item 6): an operator's own class
# list is kept, rckpt and pcr are added once, a second run changes
# nothing, --dry-run changes nothing. It changes only the configuration
# database (the test cluster's OSDs take their lists from its ceph.conf,
# which wins) and puts it back. Exit 77 (skipped) without a cluster,
# unless RCKPT_REQUIRE_CLUSTER=1.
set -u
. "$(dirname "$0")/../testlib.sh"
script=$1
need_cluster
t=$(mktemp -d)
restore() {
	ceph config rm osd osd_class_load_list >/dev/null 2>&1
	ceph config rm osd osd_class_default_list >/dev/null 2>&1
	rm -rf "$t"
}
trap restore EXIT
get() { ceph config get osd "$1"; }

check "an operator's own lists" bash -c "ceph config set osd osd_class_load_list 'lock rbd mine' &&
	ceph config set osd osd_class_default_list 'lock mine pcr'"
check "--dry-run: exit 0" expect_run 0 "$t/o" "$script" --dry-run
check "  prints the load list it would set" contains "$t/o" "osd_class_load_list lock\\ rbd\\ mine\\ rckpt\\ pcr"
check "  and the default list, pcr once" contains "$t/o" "osd_class_default_list lock\\ mine\\ pcr\\ rckpt"
check "  changes nothing" test "$(get osd_class_load_list)" = "lock rbd mine"
check "a run: exit 0" expect_run 0 "$t/o" "$script"
check "  keeps the list and adds both" test "$(get osd_class_load_list)" = "lock rbd mine rckpt pcr"
check "  adds only what is missing" test "$(get osd_class_default_list)" = "lock mine pcr rckpt"
check "  says to restart the OSDs" contains "$t/o" "restart the OSDs"
check "a second run: exit 0" expect_run 0 "$t/o" "$script"
check "  unchanged" contains "$t/o" "osd_class_load_list has rckpt pcr already: unchanged"
check "  the same list" test "$(get osd_class_load_list)" = "lock rbd mine rckpt pcr"
check "bad class name: exit 2" expect_run 2 "$t/o" "$script" --classes "rckpt;rm"
finish
