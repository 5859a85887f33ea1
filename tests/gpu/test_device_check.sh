#!/usr/bin/env bash
# test_device_check.sh — gpu/device-check.sh's parts that need no device
# (issue 31): its argument handling; the GPU-only configuration built with
# none of the project's packages but the ones gpu/carry-deps.sh unpacks
# (the system's headers and libraries of zstd, OpenSSL, jansson, cmocka,
# librados and TurboJPEG hidden in a mount namespace, as on a bare CUDA
# image), its programs needing none of them at run time; and the report
# written from bench_gpu's and the baselines' output. On a machine with a
# device the script's checks run too and must pass.
# Exit 77 (skipped) without nvcc, or without Debian's registry for the
# packages (unless RCKPT_REQUIRE_ALL=1, as in CI).
set -u
. "$(dirname "$0")/../testlib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
dc=$src/gpu/device-check.sh
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

check "--help: exit 0" expect_run 0 "$t/o" "$dc" --help
check "  usage" contains "$t/o" "usage: device-check.sh [options] OUTDIR"
check "no OUTDIR: exit 2" expect_run 2 "$t/o" "$dc"
check "  says so" contains "$t/o" "needs OUTDIR"
check "bad option: exit 2" expect_run 2 "$t/o" "$dc" --nope "$t/x"
check "  names it" contains "$t/o" "bad option '--nope'"
check "bad --sizes: exit 2" expect_run 2 "$t/o" "$dc" --sizes 10Q "$t/x"
check "--reps 0: exit 2" expect_run 2 "$t/o" "$dc" --reps 0 "$t/x"
check "--budget x: exit 2" expect_run 2 "$t/o" "$dc" --budget x "$t/x"
check "--deps without packages: exit 2" expect_run 2 "$t/o" "$dc" --deps "$t" "$t/x"
check "an option without its value: exit 2" expect_run 2 "$t/o" "$dc" "$t/x" --sizes
check "  nothing written" test ! -e "$t/x"

# The report, from bench_gpu's and the baselines' lines as they print them.
mkdir -p "$t/r"
printf 'step,status,seconds,detail\ndevice,ok,0,NVIDIA H100; 9.0\nbuild,ok,60,x\nparity,ok,40,7 cases passed\n' >"$t/r/steps.csv"
cat >"$t/r/bench.log" <<'LOG'
csv,10000000,copy (yardstick),0.030000,1333.333,1.0000
csv,10000000,sketch |w|,0.020000,2000.000,0.6700
csv,10000000,thresholds from histogram (device),0.005000,8000.000,0.0000
csv,10000000,histogram to host + k-means (host),0.100000,400.000,0.0000
csv,10000000,END TO END quantize (no gradients),0.060000,666.667,0.7000
csv,10000000,thresholds by sort (baseline),0.500000,80.000,0.0000
csv,10000000,k-means on raw values, 30 it (baseline),1.500000,26.667,0.0000
LOG
# a line of other output, and the last one cut short (killed at its limit): left out
printf 'csv,oops,x,1,2,3\ncsv,10000000,dequantize,0.01' >>"$t/r/bench.log"
printf 'csv,10000000,torch,quantile,0.7500\ncsv,10000000,cupy,percentile,0.9000\n' >"$t/r/baselines.log"
check "the report from figures: exit 0" expect_run 0 "$t/o" /usr/bin/python3 "$src/gpu/device_report.py" "$t/r"
check "  end to end 70% of the copy: met" grep -qE '^\| end to end .* \| 70% \| yes \|$' "$t/r/device-check.md"
check "  thresholds 20x the sort: met" grep -qE '^\| thresholds .* \| 20\.0x \| yes \|$' "$t/r/device-check.md"
check "  k-means 15x Lloyd: not met" grep -qE '^\| clustering .* \| 15\.0x \| no \|$' "$t/r/device-check.md"
check "  parity: byte-identical" grep -qE '^\| records byte-identical .* \| yes \|$' "$t/r/device-check.md"
check "  the baselines' table" grep -qE '^\| 10000000 \| torch \| quantile \| 0\.750 \|$' "$t/r/device-check.md"
check "  every figure in the CSV, no broken line" bash -c "[ \$(grep -c ',ms$' '$t/r/device-check.csv') -eq 9 ] && grep -q '^goal,10000000,km,15.0000,ratio$' '$t/r/device-check.csv'"

# The GPU-only configuration as on a bare CUDA image.
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || skip_test data "no nvcc: the GPU-only configuration needs CUDA"
export PATH=$PATH:/usr/local/cuda/bin
if ! "$src/gpu/carry-deps.sh" "$t/deps" >"$t/deps.log" 2>&1; then
	cat "$t/deps.log"
	skip_test data "gpu/carry-deps.sh could not fetch Debian's packages"
fi
hide=()
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
	for f in /usr/include/{zstd.h,zdict.h,zstd_errors.h,jansson.h,jansson_config.h,cmocka.h,turbojpeg.h,jpeglib.h} \
		/usr/lib/"$ma"/lib{zstd,crypto,ssl,jansson,cmocka,rados,turbojpeg,jpeg}.{a,so}; do
		# files only: a mount over a link would cover what it points to
		# (libssl.so -> libssl.so.3, which cmake itself runs with)
		[ -f "$f" ] && [ ! -L "$f" ] && hide+=("mount --bind /dev/null $f;")
	done
	for d in /usr/include/openssl /usr/include/"$ma"/openssl /usr/include/rados; do
		[ -d "$d" ] && hide+=("mount -t tmpfs none $d;")
	done
	echo "(building with ${#hide[@]} of the system's headers, static libraries and include folders hidden)"
else
	echo "(not root, or no mount namespace: building beside the system's packages)"
fi
run_dc() { # the device check in the namespace that hides them
	if [ ${#hide[@]} -gt 0 ]; then
		unshare -m bash -c "set -e; ${hide[*]} exec \"\$@\"" dc "$dc" "$@"
	else
		"$dc" "$@"
	fi
}
want=77
nvidia-smi -L >/dev/null 2>&1 && want=0
check "device-check.sh with the carried packages: exit $want" expect_run "$want" "$t/o" run_dc --deps "$t/deps" --build-dir "$t/b" --sizes 10M --reps 3 "$t/out"
check "  built" grep -q '^build,ok,' "$t/out/steps.csv"
check "  the report" test -s "$t/out/device-check.md"
check "  the figures" test -s "$t/out/device-check.csv"
[ "$want" = 77 ] && check "  says there is no device" grep -q '^parity,skip,0,no CUDA device$' "$t/out/steps.csv"
for p in test_gpu_parity bench_gpu; do
	check "$p needs no zstd, libcrypto or jansson at run time" bash -c "! ldd '$t/b/$p' | grep -qE 'libzstd|libcrypto|libjansson|librados'"
done
check "test_gpu_parity finds the carried cmocka" bash -c "ldd '$t/b/test_gpu_parity' | grep -q 'libcmocka.so.0 => $t/deps/'"
finish
