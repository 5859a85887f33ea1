# testlib.sh — a few helpers for the shell tests: `check DESC CMD...` runs a
# check, `finish` prints the totals and sets the exit status.
passed=0 failed=0

check() {
	local desc=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
		echo "ok - $desc"
	else
		failed=$((failed + 1))
		echo "not ok - $desc"
	fi
}

# expect_run STATUS OUTFILE CMD...: run CMD, stdout+stderr to OUTFILE, and
# succeed when it exits with STATUS.
expect_run() {
	local want=$1 out=$2 rc=0
	shift 2
	"$@" >"$out" 2>&1 || rc=$?
	[ "$rc" = "$want" ] || { echo "  expected exit $want, got $rc from: $*" >&2; sed 's/^/  | /' "$out" >&2; return 1; }
}

contains() { grep -qF -- "$2" "$1" || { echo "  '$2' not in output:" >&2; sed 's/^/  | /' "$1" >&2; return 1; }; }
lines() { [ "$(wc -l <"$1")" -eq "$2" ] || { echo "  expected $2 line(s) in:" >&2; sed 's/^/  | /' "$1" >&2; return 1; }; }

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# need_cluster: exit 77 (skipped) unless CEPH_CONF names a cluster; exit 1
# instead when RCKPT_REQUIRE_CLUSTER=1 (CI always has one).
need_cluster() {
	if [ -z "${CEPH_CONF:-}" ]; then
		echo "skipped: no cluster (CEPH_CONF is not set; ./dev.sh test starts one)"
		[ "${RCKPT_REQUIRE_CLUSTER:-0}" = 1 ] && exit 1
		exit 77
	fi
}

# need_real_checkpoints: exit 77 (skipped) unless RCKPT_TEST_CKPT_DIR holds
# the real checkpoints of the make_test_checkpoints fixture.
need_real_checkpoints() {
	if [ -z "${RCKPT_TEST_CKPT_DIR:-}" ] || ! ls "$RCKPT_TEST_CKPT_DIR"/step-*.safetensors >/dev/null 2>&1; then
		echo "skipped: no real checkpoints (the make_test_checkpoints fixture)"
		exit 77
	fi
}
