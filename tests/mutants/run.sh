#!/usr/bin/env bash
# tests/mutants/run.sh — show that the tests fail when the code breaks.
#
# Each tests/mutants/NAME.patch is a small, deliberate bug. Its header says
# which tests must then fail, and optionally why:
#
#   # expect: test_a test_b      ctest names that must fail with the bug in
#   # why: ERE                   their output must match it (failing for the
#                                right reason, not for a missing fixture)
#   # build: target...           what to rebuild after patching
#   # cost: cheap | cluster      cheap: seconds, run in CI (test_mutants);
#                                cluster: starts a cluster of its own, minutes
#
# The script copies the working tree to a scratch folder once (the files git
# tracks or would track; build folders stay behind), configures a plain debug
# build there without CUDA, makes the fixtures the chosen tests need, and
# then for each mutant: applies its patch, rebuilds, runs the expected tests
# with RCKPT_REQUIRE_ALL=1 (as in CI), reverses the patch. A mutant is killed
# when every expected test fails (and, with "why", says why); one that
# survives, or that cannot be applied or built, fails the run.
set -euo pipefail
prog=tests/mutants/run.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
	cat <<EOF
usage: $prog [--cheap] [--keep] [--list] [-j N] [NAME...]

Applies each mutant (tests/mutants/NAME.patch; all of them by default) to a
scratch copy of the tree and checks that the tests it names fail.

  --cheap    only the mutants marked 'cost: cheap' (what CI runs, a minute
             or two); the others start a cluster of their own and run the
             crash test (several minutes each)
  --keep     keep the scratch folder (its path is printed)
  --list     list the mutants and what each expects, and exit
  -j N       build jobs (default: the number of cores)
  -h, --help this text
EOF
}

cheap=0 keep=0 list=0 jobs=$(nproc 2>/dev/null || echo 2)
names=()
while [ $# -gt 0 ]; do
	case "$1" in
	--cheap) cheap=1; shift ;;
	--keep) keep=1; shift ;;
	--list) list=1; shift ;;
	-j) [ $# -ge 2 ] || { echo "$prog: -j needs a number" >&2; exit 2; }; jobs=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "$prog: unknown option $1; try --help" >&2; exit 2 ;;
	*) names+=("${1%.patch}"); shift ;;
	esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "$prog: -j wants a positive number, not '$jobs'" >&2; exit 2; }

# hdr FILE KEY: the value of the header line "# KEY: value"
hdr() { sed -n "s/^# $2: *//p" "$1" | head -n 1; }

if [ ${#names[@]} -eq 0 ]; then
	for f in "$here"/*.patch; do names+=("$(basename "$f" .patch)"); done
fi
sel=()
for n in "${names[@]}"; do
	f=$here/$n.patch
	[ -f "$f" ] || { echo "$prog: no mutant '$n' (tests/mutants/$n.patch)" >&2; exit 2; }
	cost=$(hdr "$f" cost)
	case "$cost" in cheap | cluster) ;; *) echo "$prog: $n: 'cost: $cost' is neither cheap nor cluster" >&2; exit 2 ;; esac
	[ -n "$(hdr "$f" expect)" ] || { echo "$prog: $n: no '# expect:' line" >&2; exit 2; }
	[ -n "$(hdr "$f" build)" ] || { echo "$prog: $n: no '# build:' line" >&2; exit 2; }
	[ "$cheap" = 1 ] && [ "$cost" != cheap ] && continue
	sel+=("$n")
done
if [ "$list" = 1 ]; then
	for n in "${sel[@]}"; do
		printf '%-26s %-8s expects %s to fail\n' "$n" "$(hdr "$here/$n.patch" cost)" "$(hdr "$here/$n.patch" expect)"
	done
	exit 0
fi
[ ${#sel[@]} -gt 0 ] || { echo "$prog: no mutant chosen" >&2; exit 2; }
for tool in cmake ctest patch tar; do
	command -v "$tool" >/dev/null || { echo "$prog: needs $tool (./dev.sh deps installs it)" >&2; exit 2; }
done

s=$(mktemp -d "${TMPDIR:-/tmp}/rckpt-mutants.XXXXXX")
cluster_up=""
cleanup() {
	[ -n "$cluster_up" ] && "$repo/ceph-conf/local-cluster.sh" --dir "$s/cluster" stop >/dev/null 2>&1
	if [ "$keep" = 1 ]; then echo "kept $s"; else rm -rf "$s"; fi
}
trap cleanup EXIT
t0=$SECONDS
say() { printf '[%4ds] %s\n' $((SECONDS - t0)) "$*"; }

# ---- the scratch copy and its build ----
mkdir -p "$s/src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# tracked and untracked-but-not-ignored files, as they are on disk now
	git -C "$repo" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -f "$repo/$f" ] && printf '%s\0' "$f"; done |
		tar -C "$repo" --null -T - -cf - | tar -C "$s/src" -xf -
else
	tar -C "$repo" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$s/src" -xf -
fi
say "scratch copy in $s; configuring (debug, no CUDA)"
cmake -S "$s/src" -B "$s/build" -DCMAKE_BUILD_TYPE=Debug -DRCKPT_CUDA=OFF -DRCKPT_SANITIZE=OFF \
	>"$s/configure.log" 2>&1 || { tail -n 30 "$s/configure.log" >&2; echo "$prog: configure failed" >&2; exit 1; }

# Every mutant runs as CI does: a test that cannot run fails. Only the
# cluster mutants get a cluster (their own, with the scratch build's plugins);
# the others keep the caller's CEPH_CONF, if any.
export RCKPT_REQUIRE_ALL=1 RCKPT_REQUIRE_CLUSTER=1
unset RCKPT_REQUIRE_GPU
outer_conf=${CEPH_CONF:-}

all_expect=()
targets=()
for n in "${sel[@]}"; do
	read -r -a e <<<"$(hdr "$here/$n.patch" expect)"
	read -r -a b <<<"$(hdr "$here/$n.patch" build)"
	all_expect+=("${e[@]}")
	targets+=("${b[@]}")
	[ "$(hdr "$here/$n.patch" cost)" = cluster ] && targets+=(cls_rckpt cls_pcr) # its cluster loads both
done
say "building the unmutated ${targets[*]}"
cmake --build "$s/build" -j "$jobs" --target "${targets[@]}" >"$s/build.log" 2>&1 ||
	{ tail -n 30 "$s/build.log" >&2; echo "$prog: the unmutated tree does not build" >&2; exit 1; }
# The fixtures the expected tests need (trained models, photos), made once
# by the unmutated tree; the mutant runs then leave them alone (-FA).
re=$(printf '%s|' "${all_expect[@]}")
re="^(${re%|})\$"
mapfile -t fixtures < <(ctest --test-dir "$s/build" -N -R "$re" | sed -n 's/^ *Test *#[0-9]*: //p' | grep -vxE "${re}" || true)
if [ ${#fixtures[@]} -gt 0 ]; then
	say "making the fixtures: ${fixtures[*]}"
	fre=$(printf '%s|' "${fixtures[@]}")
	ctest --test-dir "$s/build" -R "^(${fre%|})\$" --output-on-failure >"$s/fixtures.log" 2>&1 ||
		{ tail -n 40 "$s/fixtures.log" >&2; echo "$prog: a fixture failed" >&2; exit 1; }
fi

# ---- the mutants ----
killed=0 bad=0
for n in "${sel[@]}"; do
	f=$here/$n.patch
	read -r -a expect <<<"$(hdr "$f" expect)"
	read -r -a build <<<"$(hdr "$f" build)"
	why=$(hdr "$f" why)
	cost=$(hdr "$f" cost)
	[ "$cost" = cluster ] && build+=(cls_rckpt cls_pcr)
	log=$s/$n.log
	if ! patch -d "$s/src" -p1 --forward --no-backup-if-mismatch -s <"$f" >"$log" 2>&1; then
		say "$n: BROKEN: the patch does not apply"; sed 's/^/    /' "$log"; bad=$((bad + 1)); continue
	fi
	say "$n: building ${build[*]}"
	if ! cmake --build "$s/build" -j "$jobs" --target "${build[@]}" >>"$log" 2>&1; then
		say "$n: BROKEN: the mutant does not build"; grep -E -A5 'error' "$log" | head -n 20 | sed 's/^/    /'
		bad=$((bad + 1))
		patch -d "$s/src" -p1 -R --no-backup-if-mismatch -s <"$f"
		continue
	fi
	if [ "$cost" = cluster ]; then
		"$repo/ceph-conf/local-cluster.sh" --dir "$s/cluster" wipe >/dev/null 2>&1 || true
		say "$n: starting a cluster with the mutant's plugins"
		cluster_up=1
		"$repo/ceph-conf/local-cluster.sh" --dir "$s/cluster" --plugins "$s/build/rados-classes" start >>"$log" 2>&1 ||
			{ say "$n: BROKEN: the cluster did not start"; tail -n 20 "$log"; exit 1; }
		export CEPH_CONF=$s/cluster/ceph.conf
	elif [ -n "$outer_conf" ]; then
		export CEPH_CONF=$outer_conf
	else
		unset CEPH_CONF
	fi
	ere=$(printf '%s|' "${expect[@]}")
	say "$n: running ${expect[*]} (each must fail)"
	rm -f "$s/build/Testing/Temporary/LastTestsFailed.log"
	ctest --test-dir "$s/build" -R "^(${ere%|})\$" -FA '.*' --output-on-failure >>"$log" 2>&1 || true
	if [ "$cost" = cluster ]; then
		"$repo/ceph-conf/local-cluster.sh" --dir "$s/cluster" stop >/dev/null 2>&1 || true
		cluster_up=""
	fi
	failed=$(sed 's/^[0-9]*://' "$s/build/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true)
	survived=()
	for e in "${expect[@]}"; do
		grep -qxF "$e" <<<"$failed" || survived+=("$e")
	done
	if [ ${#survived[@]} -gt 0 ]; then
		say "$n: SURVIVED: ${survived[*]} passed with the bug in (log: $log)"
		bad=$((bad + 1)); keep=1
	elif [ -n "$why" ] && ! grep -qE -- "$why" "$log"; then
		say "$n: FAILED FOR ANOTHER REASON: no line matches '$why' (log: $log)"
		bad=$((bad + 1)); keep=1
	else
		say "$n: killed by ${expect[*]}"
		grep -E -m 3 'cannot run|not their source|LOST|Expected|differs|mismatch|!=|FAILED|error' "$log" | sed 's/^/    | /' || true
		killed=$((killed + 1))
	fi
	patch -d "$s/src" -p1 -R --no-backup-if-mismatch -s <"$f" || { echo "$prog: cannot reverse $n" >&2; exit 1; }
done
say "mutants: ${#sel[@]} run, $killed killed, $bad survived or broken"
[ "$bad" -eq 0 ]
