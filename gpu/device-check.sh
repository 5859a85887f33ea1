#!/usr/bin/env bash
# device-check.sh [options] OUTDIR — verify and benchmark the CUDA path on a
# machine with a device, in one command (issue 31): build the GPU-only
# configuration (gpu/gpu-only.cmake) for the device's architecture; run
# test_gpu_parity with the real checkpoints; run compute-sanitizer
# (memcheck, racecheck) over its kernel cases; run bench_gpu and the
# torch/CuPy baselines (bench/gpu/gpu_baselines.py); write OUTDIR/device-check.md
# (the report, against issue 31's goals) and OUTDIR/device-check.csv (every
# figure), with each step's log beside them.
#
# Without a device it builds, skips the rest with the reason, writes the
# report, and exits 77. The exact `device` call is in docs/gpu.md
# ("Checking on a lent device").
set -uo pipefail
prog=${0##*/}
src=$(cd "$(dirname "$0")/.." && pwd)

usage() {
	cat <<USAGE
usage: $prog [options] OUTDIR

Builds the GPU-only configuration and runs the GPU checks and benchmarks,
writing OUTDIR/device-check.md and OUTDIR/device-check.csv.

  --deps DIR       Debian packages unpacked by gpu/carry-deps.sh (zstd,
                   libcrypto, jansson, cmocka), for a machine without them
  --ckpt-dir DIR   real checkpoints (default: build/test-checkpoints if there;
                   else made here with bench/data/make_checkpoints.py)
  --lm-dir DIR     the test transformer with AdamW state (default:
                   build/test-lm if there)
  --sizes LIST     bench_gpu and baseline sizes (default 10M,100M,1G)
  --reps N         timed runs per figure (default 5)
  --arch N         CUDA architecture (default: the device's, else 90)
  --build-dir DIR  where to build (default: build-gpu in the source tree)
  --jobs N         build jobs (default: the cores)
  --budget S       seconds for the whole check (default 540, for the device
                   tool's 600-second call): each step gets what is left,
                   up to its own limit, and is skipped under 20 s
  -h, --help       this text

Exit status: 0 every check ran and passed on a device; 1 a check failed
(the parity test running out of time counts as failing); 3 a check did not
complete (out of time, cases skipped, no compute-sanitizer); 2 bad usage;
77 no device (built, reported, nothing run).
USAGE
}

die_usage() { echo "$prog: $*; try '$prog --help'" >&2; exit 2; }
deps='' ckpt='' lm='' sizes=10M,100M,1G reps=5 arch='' bdir=$src/build-gpu jobs=$(nproc 2>/dev/null || echo 2)
budget=540
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--deps | --ckpt-dir | --lm-dir | --sizes | --reps | --arch | --build-dir | --jobs | --budget)
		[ $# -ge 2 ] && [ -n "$2" ] || die_usage "option '$1' needs a value"
		case $1 in
		--deps) deps=$2 ;; --ckpt-dir) ckpt=$2 ;; --lm-dir) lm=$2 ;; --sizes) sizes=$2 ;;
		--reps) reps=$2 ;; --arch) arch=$2 ;; --build-dir) bdir=$2 ;; --jobs) jobs=$2 ;;
		--budget) budget=$2 ;;
		esac
		shift 2 ;;
	--) shift; break ;;
	-*) die_usage "bad option '$1'" ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || die_usage "$([ $# -eq 0 ] && echo "needs OUTDIR" || echo "one OUTDIR only")"
out=$1
[[ $sizes =~ ^[0-9]+[KMG]?(,[0-9]+[KMG]?)*$ ]] || die_usage "bad --sizes '$sizes' (e.g. 10M,100M,1G)"
[[ $reps =~ ^[1-9][0-9]?$ ]] || die_usage "bad --reps '$reps' (1..99)"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die_usage "bad --jobs '$jobs'"
[[ $budget =~ ^[1-9][0-9]*$ ]] || die_usage "bad --budget '$budget'"
deadline=$(($(date +%s) + budget))
[ -z "$arch" ] || [[ $arch =~ ^[0-9]{2,3}a?$ ]] || die_usage "bad --arch '$arch' (e.g. 90)"
[ -z "$deps" ] || [ -d "$deps/usr/include" ] || die_usage "--deps $deps holds no usr/include (made by gpu/carry-deps.sh?)"
for d in "$ckpt" "$lm"; do [ -z "$d" ] || [ -d "$d" ] || die_usage "no folder $d"; done
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
steps=$out/steps.csv
echo "step,status,seconds,detail" >"$steps"
failed=0 incomplete=0

# step NAME STATUS SECONDS DETAIL: one row of steps.csv (and on stdout)
step() {
	printf '%s,%s,%s,%s\n' "$1" "$2" "$3" "${4//,/;}" >>"$steps"
	printf '%s: %-12s %-10s %5ss  %s\n' "$prog" "$1" "$2" "$3" "$4"
	[ "$2" != fail ] || failed=1
	[ "$2" != incomplete ] || incomplete=1
}
# run NAME LOG LIMIT CMD...: the command's status, its output in LOG; it
# gets LIMIT seconds or what is left of the budget, less. 124: out of time.
run() {
	local name=$1 log=$2 limit=$3 t0 rc left
	shift 3
	t0=$(date +%s)
	left=$((deadline - t0))
	[ "$left" -lt "$limit" ] && limit=$left
	last_secs=0
	if [ "$limit" -lt 20 ]; then
		echo "$prog: no time left for $name" >"$log"
		return 124
	fi
	timeout "$limit" "$@" >"$log" 2>&1
	rc=$?
	last_secs=$(($(date +%s) - t0))
	[ $rc -ne 124 ] || echo "$prog: $name ran out of its $limit s" >>"$log"
	return $rc
}
# outcome RC: the status word of a step that did not pass: 124 (out of
# time) and 77 (cases skipped) are "incomplete", anything else "fail"
outcome() { case $1 in 124 | 77) echo incomplete ;; *) echo fail ;; esac; }

# ---- the device ----
dev=none cap=''
if command -v nvidia-smi >/dev/null; then
	if q=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null) &&
		[ -n "$q" ]; then
		dev=$(echo "$q" | head -1)
		cap=$(echo "$dev" | cut -d, -f2 | tr -d ' .')
	elif q=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) &&
		[ -n "$q" ]; then # a driver that does not know compute_cap
		dev=$(echo "$q" | head -1)
	fi
fi
[ -n "$arch" ] || arch=${cap:-90}
echo "device,$dev" | tr -d '\r' >"$out/device.txt"
step device "$([ "$dev" = none ] && echo none || echo ok)" 0 "$dev; building for sm_$arch"

# ---- build ----
cfg=(-S "$src" -B "$bdir" -DRCKPT_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CUDA_ARCHITECTURES=$arch")
[ -z "$deps" ] || cfg+=("-DCMAKE_PREFIX_PATH=$(cd "$deps" && pwd)/usr")
if run build "$out/build.log" 300 bash -c "cmake $(printf '%q ' "${cfg[@]}") && cmake --build $(printf '%q' "$bdir") -j $jobs"; then
	step build ok "$last_secs" "GPU-only configuration in $bdir"
else
	rc=$?
	step build "$(outcome $rc)" "$last_secs" "see build.log: $(grep -m1 -E 'error|Error|ran out' "$out/build.log" | cut -c1-160)"
fi
parity=$bdir/test_gpu_parity bench=$bdir/bench_gpu

# ---- data: the real checkpoints and the test transformer ----
[ -n "$ckpt" ] || { [ -d "$src/build/test-checkpoints" ] && ckpt=$src/build/test-checkpoints; }
[ -n "$lm" ] || { [ -d "$src/build/test-lm" ] && lm=$src/build/test-lm; }
if [ -z "$ckpt" ] && [ "$dev" != none ] && command -v python3 >/dev/null; then
	ckpt=$bdir/device-checkpoints
	if run data "$out/data.log" 120 python3 "$src/bench/data/make_checkpoints.py" "$ckpt" --steps 150 --every 25 --width 64; then
		step data ok "$last_secs" "made real checkpoints in $ckpt"
	else
		step data skip "$last_secs" "could not make checkpoints (data.log); the real cases skip"
		ckpt=''
	fi
fi

# ---- the checks ----
if [ "$dev" = none ]; then
	for s in parity memcheck racecheck bench baselines; do step "$s" skip 0 "no CUDA device"; done
elif [ ! -x "$parity" ]; then
	for s in parity memcheck racecheck bench baselines; do step "$s" skip 0 "not built"; done
else
	export RCKPT_REQUIRE_GPU=1 RCKPT_TEST_CKPT_DIR=$ckpt RCKPT_TEST_LM_DIR=$lm
	if run parity "$out/parity.log" 240 "$parity"; then
		step parity ok "$last_secs" "$(grep -c '^\[       OK \]' "$out/parity.log") cases passed"
	else
		rc=$?
		if [ $rc = 77 ]; then
			step parity incomplete "$last_secs" "cases skipped: $(grep -E '^skipped: ' "$out/parity.log" | sort -u | cut -c10- | tr '\n' ';' | cut -c1-200)"
		else # out of time too: a kernel that hangs must not pass
			step parity fail "$last_secs" "see parity.log: $(grep -m1 -E 'FAILED|rror|ran out' "$out/parity.log" | cut -c1-160)"
		fi
	fi
	# the kernels' cases at small sizes, under the sanitizer's tools
	san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer "$(dirname "$(command -v nvcc || echo /x/x)")"/compute-sanitizer 2>/dev/null | head -1)
	for tool in memcheck racecheck; do
		if [ -z "$san" ]; then
			step "$tool" incomplete 0 "no compute-sanitizer"
		elif RCKPT_TEST_GPU_BIG=0 RCKPT_TEST_GPU_SMALL=1 RCKPT_TEST_FILTER='test_kernels' run "$tool" \
			"$out/$tool.log" "$([ $tool = racecheck ] && echo 200 || echo 90)" "$san" --tool "$tool" --error-exitcode 3 "$parity"; then
			step "$tool" ok "$last_secs" "$(grep -m1 'ERROR SUMMARY' "$out/$tool.log" || echo 'no errors')"
		else
			rc=$?
			step "$tool" "$(outcome $rc)" "$last_secs" "see $tool.log: $(grep -m1 -E 'ERROR SUMMARY|Invalid|Race|ran out' "$out/$tool.log" | cut -c1-160)"
		fi
	done
	if run bench "$out/bench.log" 180 "$bench" --sizes "$sizes" --reps "$reps"; then
		step bench ok "$last_secs" "bench_gpu --sizes $sizes --reps $reps"
	else
		rc=$?
		step bench "$(outcome $rc)" "$last_secs" "see bench.log"
	fi
	if ! command -v python3 >/dev/null; then
		step baselines skip 0 "no python3"
	elif run baselines "$out/baselines.log" 90 python3 -u "$src/bench/gpu/gpu_baselines.py" --sizes "$sizes" --reps "$reps"; then
		step baselines ok "$last_secs" "torch.quantile and CuPy"
	else
		rc=$?
		step baselines "$(outcome $rc)" "$last_secs" "see baselines.log"
	fi
fi

# ---- the report ----
if python3 "$src/gpu/device_report.py" "$out"; then
	echo "$prog: report in $out/device-check.md, figures in $out/device-check.csv"
else
	echo "$prog: the report could not be written" >&2
	exit 1
fi
[ "$failed" = 0 ] || exit 1
[ "$dev" != none ] || exit 77
[ "$incomplete" = 0 ] || exit 3
exit 0
