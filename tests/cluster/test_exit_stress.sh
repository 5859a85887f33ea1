#!/usr/bin/env bash
# test_exit_stress.sh RCKPT [RUNS] — short multi-process runs must exit
# cleanly. Each run is bench/loader/loader_bytes.py with 4 learners (processes,
# torch.distributed over gloo, each with its own librados client) on a small
# PCR dataset; every other run with both cores kept busy by two spinning
# processes, where a teardown race has the most room. Every learner must
# exit 0: loader_bytes.py reports each one's exit status or signal and its
# stderr. RUNS: default 2 (one quiet, one busy), or $RCKPT_EXIT_RUNS (the
# full stress: 40).
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
runs=${2:-${RCKPT_EXIT_RUNS:-2}}
need_cluster
[ -d "${RCKPT_TEST_PCR_DIR:-}" ] || skip_test data "no photo data set (RCKPT_TEST_PCR_DIR: the make_test_pcr_images fixture)"
/usr/bin/python3 -c 'import torch' 2>/dev/null || skip_test data "python3-torch is not installed"
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d)
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; hogs=(); }
trap 'stop_hogs; rm -rf "$t"' EXIT
clean=0 busy=0
for ((r = 1; r <= runs; r++)); do
	if [ $((r % 2)) -eq 0 ]; then # both cores busy
		for c in 1 2; do (while :; do :; done) & hogs+=($!); done
	fi
	if /usr/bin/python3 "$here/../../bench/loader/loader_bytes.py" "$RCKPT_TEST_PCR_DIR" --rckpt "$rckpt" \
		--images 256 --epochs 1 --learners 4 >"$t/out" 2>"$t/err"; then
		clean=$((clean + 1))
		[ ${#hogs[@]} -gt 0 ] && busy=$((busy + 1))
	else
		echo "run $r$([ ${#hogs[@]} -gt 0 ] && echo ' (cores busy)'): loader_bytes.py failed:" >&2
		tail -n 25 "$t/err" | sed 's/^/  | /' >&2
	fi
	stop_hogs
done
echo "$clean of $runs runs exited cleanly ($busy of them with the cores busy)"
check "every learner of every run exited 0" test "$clean" -eq "$runs"
finish
