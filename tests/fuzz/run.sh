#!/usr/bin/env bash
# tests/fuzz/run.sh — fuzz rckpt's decoders with libFuzzer for a given time.
#
#   tests/fuzz/run.sh [--seconds N] [--jobs J] [--workers W] [--build DIR] [TARGET...]
#
# Builds the fuzz targets with clang (DIR, default build-fuzz: RCKPT_FUZZ=ON,
# no CUDA; every source instrumented for coverage, ASan+UBSan), then runs
# each TARGET (default: all) for N seconds (default 600) on a working copy
# of its corpus, J targets at a time (default: the CPU count), each with W
# processes sharing its working corpus (default 1; executions are summed). New inputs
# that add coverage are merged back into tests/fuzz/corpus/TARGET; a crash
# is kept under tests/fuzz/crashes/TARGET/ and fails the run. Prints, per
# target: executions, seconds, executions/s, corpus before and after.
#
# Targets: wire istream record manifest store pcr (what runs in the OSDs),
# safetensors (the client's reader of user files), replies (what clients
# decode from the OSDs: every reply of the rckpt class, attachments),
# loader (the locality-aware loader's messages from peers), dump (restores
# from a `rados export` dump, with no cluster).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
seconds=600
jobs=$(nproc 2>/dev/null || echo 2)
workers=1
build=$repo/build-fuzz
all=(wire istream record manifest store pcr safetensors replies loader dump)
targets=()

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) seconds=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--workers) workers=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	*) targets+=("$1"); shift ;;
	esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
	[[ " ${all[*]} " == *" $t "* ]] || { echo "run.sh: no target $t (${all[*]})" >&2; exit 2; }
done
case "$seconds" in '' | *[!0-9]*) echo "run.sh: --seconds takes a number" >&2; exit 2 ;; esac
case "$workers" in '' | 0 | *[!0-9]*) echo "run.sh: --workers takes a number from 1" >&2; exit 2 ;; esac
command -v clang >/dev/null || { echo "run.sh: needs clang (apt-get install clang)" >&2; exit 1; }

echo "==> building fuzz targets in $build"
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -DRCKPT_FUZZ=ON -DRCKPT_CUDA=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/cmake.log" 2>&1 ||
	{ tail -20 "$build/cmake.log" >&2; exit 1; }
cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}") >"$build/build.log" 2>&1 ||
	{ tail -30 "$build/build.log" >&2; exit 1; }

run_one() {
	local t=$1 work=$build/fuzz-work/$t log=$build/fuzz-work/$t.log crashes=$repo/tests/fuzz/crashes/$t
	rm -rf "$work"
	mkdir -p "$work/corpus" "$crashes"
	cp "$repo/tests/fuzz/corpus/$t"/* "$work/corpus/" 2>/dev/null || true
	local before
	before=$(ls "$work/corpus" | wc -l)
	local rc=0 w pids=()
	# W workers share the working corpus (each sees what the others add)
	for ((w = 1; w <= workers; w++)); do
		(cd "$work" && exec "$build/tests/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
			-seed=$((1000 * w + RANDOM)) -artifact_prefix="$crashes/" -rss_limit_mb=2048 -timeout=20 \
			corpus) >"$log.$w" 2>&1 &
		pids+=($!)
	done
	for w in "${pids[@]}"; do wait "$w" || rc=$?; done
	cat "$log".* >"$log"
	# keep only what adds coverage to the committed corpus
	"$build/tests/fuzz_$t" -merge=1 "$repo/tests/fuzz/corpus/$t" "$work/corpus" >>"$log" 2>&1 || true
	local execs secs after
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{n += $1} END {if (NR) print n}')
	secs=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | sort -n | tail -1)
	after=$(ls "$repo/tests/fuzz/corpus/$t" | wc -l)
	printf '%-12s %12s execs %6ss %10s/s  %s worker(s)  corpus %s -> %s  %s\n' "$t" "${execs:-?}" "${secs:-?}" \
		"$([ -n "${execs:-}" ] && [ -n "${secs:-}" ] && [ "$secs" -gt 0 ] && echo $((execs / secs)) || echo '?')" \
		"$workers" "$before" "$after" "$([ $rc -eq 0 ] && echo ok || echo "CRASH (rc $rc; see $log, $crashes)")"
	return $rc
}

echo "==> fuzzing ${targets[*]} for ${seconds}s each, $jobs at a time"
fail=0
pids=()
names=()
for t in "${targets[@]}"; do
	run_one "$t" &
	pids+=($!)
	names+=("$t")
	if [ ${#pids[@]} -ge "$jobs" ]; then
		wait "${pids[0]}" || fail=1
		pids=("${pids[@]:1}")
		names=("${names[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || fail=1
done
exit $fail
