#!/usr/bin/env bash
# dev.sh — set up, build, and run rckpt on a local Ceph cluster.
#
#   ./dev.sh demo    install what is missing, build, start the local cluster,
#                    run the main job; the cluster stays up. The main job:
#                    rckpt status; a small model's real checkpoints (and its
#                    AdamW state) saved into a job, compacted, two steps
#                    restored and compared bit for bit with the codec's local
#                    decode, the job verified; a PCR data set of real photos
#                    built, read at two fidelities and verified; short
#                    fault-tolerant training from Python (ft_experiment.py
#                    --short); the quick benchmark report (rckpt bench
#                    --quick, into build/bench-report)
#   ./dev.sh test    the same set-up, then every test against a fresh local
#                    cluster of its own, which it stops at the end
set -euo pipefail

repo=$(cd "$(dirname "$0")" && pwd)
prog=./dev.sh
sanitize=0
jobs=$(nproc 2>/dev/null || echo 2)

# What the project builds and runs with, all from Debian's packages.
# python3-torch and python3-sklearn train the small real model whose
# checkpoints the codec's tests and benchmarks use (bench/data/make_checkpoints.py);
# python3-pil cuts the PCR data set out of the sample photos that
# python3-sklearn and python3-skimage ship (bench/data/make_pcr_images.py).
# OpenMPI is the locality-aware loader's exchange for C trainers
# (librckpt_mpi) and runs its multi-learner test (mpirun -np 4).
# python3-matplotlib draws the plots of `rckpt bench`'s report.
# dpkg-dev, debhelper and lintian build and check the Debian packages
# (ceph-conf/build-debs.sh); libjpeg62-turbo-dev is libjpeg-turbo's libjpeg
# API, for the PCR builder's scan scripts (TurboJPEG cannot set one).
packages=(
	build-essential cmake pkg-config jq patch
	ceph-mon ceph-mgr ceph-osd ceph-common
	librados-dev libradospp-dev rados-objclass-dev
	libzstd-dev zstd libturbojpeg0-dev libjpeg62-turbo-dev libssl-dev libcmocka-dev libjansson-dev
	python3-torch python3-sklearn python3-pil python3-skimage python3-matplotlib
	openmpi-bin libopenmpi-dev
	dpkg-dev debhelper lintian
)

usage() {
	cat <<EOF
usage: $prog [--sanitize] COMMAND

commands:
  demo        install missing packages, build, start the local cluster and run
              the main job: rckpt status, then save a real checkpoint sequence
              into a job, restore its latest step and verify it; build a PCR
              dataset of real photos and read it at two fidelities; train a
              small model from Python with failures restored from rckpt
              (bench/experiments/ft_experiment.py --short); the cluster keeps running
  test        install, build, start a fresh test cluster, run the whole test
              suite (ctest) against it, stop it
  deps        only install missing system packages (apt-get; sudo when not root)
  build       only configure and build
  cluster ... pass the rest to ceph-conf/local-cluster.sh for the demo cluster
              (e.g. '$prog cluster stop', '$prog cluster status')

options:
  --sanitize  build the library, CLI and tests with ASan+UBSan (in build-asan/)
  -h, --help  this text
EOF
}

say() { printf '==> %s\n' "$*"; }
die() { echo "$prog: error: $*" >&2; exit 1; }

cmd=""
while [ $# -gt 0 ]; do
	case "$1" in
	--sanitize) sanitize=1; shift ;;
	-h | --help | help) usage; exit 0 ;;
	demo | test | deps | build) [ -z "$cmd" ] || { echo "$prog: one command at a time" >&2; exit 2; }; cmd=$1; shift ;;
	cluster) cmd=cluster; shift; break ;;
	*) echo "$prog: unknown argument '$1'; try '$prog --help'" >&2; exit 2 ;;
	esac
done
[ -n "$cmd" ] || { echo "$prog: missing command; try '$prog --help'" >&2; exit 2; }

if [ "$sanitize" = 1 ]; then build=$repo/build-asan; else build=$repo/build; fi
cluster_script=$repo/ceph-conf/local-cluster.sh

deps() {
	local missing=() p sudo=""
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		say "system packages: all present"
		return 0
	fi
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
		sudo="sudo"
	fi
	say "installing with apt-get: ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
		>"$repo/.apt-install.log" 2>&1 ||
		{ tail -n 30 "$repo/.apt-install.log" >&2; die "apt-get install failed (log: .apt-install.log)"; }
	rm -f "$repo/.apt-install.log"
}

build() {
	local t0=$SECONDS san=OFF
	[ "$sanitize" = 1 ] && san=ON
	say "building in ${build#$repo/} (sanitizers $san)"
	# CI (CI=true) requires the optional parts the docs promise
	# (docs/reliability.md, "CI"), so a missing one fails instead of
	# dropping its tests.
	local require=""
	[ "${CI:-}" = true ] && require="CUDA;MPI;PYTHON"
	cmake -S "$repo" -B "$build" -DRCKPT_SANITIZE=$san "-DRCKPT_REQUIRE=$require" >"$build.configure.log" 2>&1 ||
		{ cat "$build.configure.log" >&2; die "cmake configure failed"; }
	grep -- '-- rckpt ' "$build.configure.log" | sed 's/^-- /    /'
	rm -f "$build.configure.log"
	cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1 ||
		{ grep -E -B2 -A8 'error|Error' "$build/build.log" | head -n 60 >&2; die "build failed (log: $build/build.log)"; }
	say "built in $((SECONDS - t0))s"
}

case "$cmd" in
deps)
	deps
	;;
build)
	deps
	build
	;;
cluster)
	exec "$cluster_script" --dir "$build/cluster" --plugins "$build/rados-classes" "$@"
	;;
demo)
	deps
	build
	say "starting the local cluster (state in ${build#$repo/}/cluster)"
	"$cluster_script" --dir "$build/cluster" --plugins "$build/rados-classes" start
	export CEPH_CONF=$build/cluster/ceph.conf
	say "main job: rckpt status"
	"$build/client/rckpt" status
	echo
	ck=$build/demo-checkpoints
	if ! ls "$ck"/step-*.optim.safetensors >/dev/null 2>&1; then
		say "training a small real model with AdamW for its checkpoints and the optimizer's state (bench/data/make_checkpoints.py)"
		rm -rf "$ck"
		/usr/bin/python3 "$repo/bench/data/make_checkpoints.py" --optim adamw "$ck" | tail -1
	fi
	job=demo-$(date +%Y%m%d-%H%M%S)
	mapfile -t ckpts < <(ls "$ck"/step-*.safetensors | grep -v '\.\(grads\|gmean\|optim\)\.' | sort)
	say "main job: save ${#ckpts[@]} checkpoints into job $job"
	"$build/client/rckpt" ckpt save --job "$job" "${ckpts[@]}"
	say "main job: compact (keep the last 4 steps and every 100th; the latest becomes a base)"
	"$build/client/rckpt" ckpt compact --job "$job" --keep-last 4 --keep-every 100
	"$build/client/rckpt" ckpt ls --job "$job" | tail -n 3
	say "main job: restore the latest step and step 100 (materialized in the OSD) and verify them"
	rm -rf "$build/demo-local" && mkdir -p "$build/demo-local"
	"$build/client/rckpt" codec encode -o "$build/demo-local" "${ckpts[@]}" >/dev/null
	mapfile -t recs < <(ls "$build/demo-local"/*.rckpt | sort)
	ok=1
	for pick in latest 100; do
		if [ "$pick" = latest ]; then
			sel=("${recs[@]}")
			"$build/client/rckpt" ckpt restore --job "$job" -o "$build/demo-restored.safetensors" || exit 1
		else
			sel=()
			for r in "${recs[@]}"; do
				sel+=("$r")
				case $r in *step-000100.rckpt) break ;; esac
			done
			"$build/client/rckpt" ckpt restore --job "$job" --step 100 -o "$build/demo-restored.safetensors" || exit 1
		fi
		"$build/client/rckpt" codec decode -o "$build/demo-local.safetensors" "${sel[@]}" >/dev/null
		if cmp -s "$build/demo-restored.safetensors" "$build/demo-local.safetensors"; then
			say "verified: step $pick equals the codec's local decode, bit for bit"
		else
			say "MISMATCH: step $pick differs from the local decode"
			ok=0
		fi
	done
	"$build/client/rckpt" ckpt verify --job "$job" || ok=0
	[ "$ok" = 1 ] || exit 1
	echo
	imgs=$build/demo-pcr-images
	if [ ! -f "$imgs/labels.csv" ]; then
		say "cutting a JPEG data set out of Debian's sample photos (bench/data/make_pcr_images.py)"
		/usr/bin/python3 "$repo/bench/data/make_pcr_images.py" --count 1000 "$imgs"
	fi
	ds=demo-$(date +%Y%m%d-%H%M%S)
	say "main job: build PCR dataset $ds from $(ls "$imgs"/*.jpg | wc -l) JPEGs"
	"$build/client/rckpt" pcr build --dataset "$ds" --labels "$imgs/labels.csv" --images-per-record 256 "$imgs" 2>/dev/null
	"$build/client/rckpt" pcr stat --dataset "$ds"
	for k in 2 all; do
		say "main job: read $ds at group $k (bytes read, images/s)"
		rm -rf "$build/demo-pcr-$k"
		"$build/client/rckpt" pcr get --dataset "$ds" --group $k --out "$build/demo-pcr-$k"
	done
	say "main job: every image at the last group against its source"
	"$build/client/rckpt" pcr verify --dataset "$ds" "$imgs" || exit 1
	echo
	pre=() # with sanitizers, Python loads the instrumented library with their runtimes
	[ "$sanitize" = 1 ] && pre=(env "LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0)
	if /usr/bin/python3 -c 'import torch, sklearn' 2>/dev/null; then
		say "main job: fault-tolerant AdamW training from Python, short version (bench/experiments/ft_experiment.py --short --optim adamw)"
		"${pre[@]}" env RCKPT_LIBRARY="$build/client/librckpt.so" /usr/bin/python3 "$repo/bench/experiments/ft_experiment.py" --short --optim adamw || exit 1
	else
		say "skipped the fault-tolerant training experiment: python3-torch or python3-sklearn is not installed"
	fi
	echo
	say "main job: the quick benchmark report (rckpt bench --quick), on the checkpoints and JPEGs above"
	"${pre[@]}" "$build/client/rckpt" bench --quick --out "$build/bench-report" --data "$build/bench-data" \
		--checkpoints "$ck" --images "$imgs" || exit 1
	echo
	say "the cluster keeps running: 'export CEPH_CONF=$CEPH_CONF' to use it,"
	say "'$prog cluster stop' to stop it"
	;;
test)
	deps
	build
	tdir=$build/test-cluster
	"$cluster_script" --dir "$tdir" wipe >/dev/null
	trap '"$cluster_script" --dir "$tdir" stop' EXIT
	say "starting a fresh test cluster (state in ${tdir#$repo/})"
	"$cluster_script" --dir "$tdir" --plugins "$build/rados-classes" start
	export CEPH_CONF=$tdir/ceph.conf RCKPT_REQUIRE_CLUSTER=1
	# In CI every test must run: one that cannot fails, saying why
	# (tests/common/test_skip.h); only the GPU test may skip.
	[ "${CI:-}" = true ] && export RCKPT_REQUIRE_ALL=1
	# In CI test_installed builds the Debian packages, installs them with
	# dpkg -i, tests them and purges them (tests/install/test_packages.sh)
	[ "${CI:-}" = true ] && export RCKPT_PACKAGE_TEST=1
	if [ "$sanitize" = 1 ]; then
		export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
		export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	fi
	say "running the tests"
	# two at a time: cluster tests take turns on the cluster (RESOURCE_LOCK,
	# tests/CMakeLists.txt), unit tests run beside them
	ctest --test-dir "$build" --output-on-failure --parallel 2
	;;
esac
