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

# skip_test NEED WHY: the test cannot run. Says so, then exits 77 (ctest:
# skipped), or 1 (failed) when NEED is required here: RCKPT_REQUIRE_ALL=1
# (CI) requires every NEED; RCKPT_REQUIRE_CLUSTER=1 (./dev.sh test) the
# cluster. NEED: cluster or data. The same rule as tests/common/test_skip.h.
skip_test() {
	local need=$1 why=$2
	echo "skipped: $why"
	if [ "${RCKPT_REQUIRE_ALL:-0}" = 1 ] || { [ "$need" = cluster ] && [ "${RCKPT_REQUIRE_CLUSTER:-0}" = 1 ]; }; then
		echo "failed: it cannot run, and RCKPT_REQUIRE_ALL=1 or RCKPT_REQUIRE_CLUSTER=1 requires it to"
		exit 1
	fi
	exit 77
}

# need_cluster: skip_test unless CEPH_CONF names a cluster.
# The model files of a folder of real checkpoints (not their gradients), in
# step order; the step a checkpoint file is (step-000025.safetensors: 25);
# a file's SHA-256.
model_files() { ls "$1"/step-*.safetensors | grep -vE '\.(grads|optim)\.' | sort; }
stepof() { basename "$1" .safetensors | sed 's/[^0-9]//g; s/^0*//'; }
sha() { sha256sum <"$1" | cut -c1-64; }

need_cluster() {
	[ -n "${CEPH_CONF:-}" ] || skip_test cluster "no cluster (CEPH_CONF is not set; ./dev.sh test starts one)"
}

# need_real_checkpoints: skip_test unless RCKPT_TEST_CKPT_DIR holds the real
# checkpoints of the make_test_checkpoints fixture.
need_real_checkpoints() {
	if [ -z "${RCKPT_TEST_CKPT_DIR:-}" ] || ! ls "$RCKPT_TEST_CKPT_DIR"/step-*.safetensors >/dev/null 2>&1; then
		skip_test data "no real checkpoints (the make_test_checkpoints fixture)"
	fi
}

# reaped NAME STATUS LOG [ALLOWED...]: judge a background process's exit
# status (from `wait`). Succeeds when STATUS is 0 or one of ALLOWED (137 for
# one the test SIGKILLed itself); else names how it ended (exit N, or the
# signal) with the end of its LOG, and fails.
reaped() {
	local name=$1 st=$2 log=$3 a how
	shift 3
	[ "$st" -eq 0 ] && return 0
	for a in "$@"; do [ "$st" -eq "$a" ] && return 0; done
	if [ "$st" -gt 128 ]; then how="died of signal SIG$(kill -l $((st - 128)) 2>/dev/null || echo $((st - 128)))"; else how="exited $st"; fi
	echo "  $name $how" >&2
	[ -s "$log" ] && tail -n 5 "$log" | sed 's/^/  | /' >&2
	return 1
}
