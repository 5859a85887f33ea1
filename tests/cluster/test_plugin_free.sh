#!/usr/bin/env bash
# test_plugin_free.sh RCKPT LOCAL_CLUSTER_SH PLUGIN_DIR — an erasure-coded
# pool refused at once; and restores never
# depend on the plugin (issue 26, formats/store.md "Restore without the
# plugin"), on a cluster of its own: a real sequence saved and compacted
# (deltas on later steps too), each kept step restored by the OSDs; then
# `rckpt ckpt export` (folding in the client) and a `rados export` dump
# taken; then the OSD restarted with the rckpt class out of its
# `osd class load list`: every kept step restores through the client to the
# same bytes, saying so, `export` gives them again, and `export
# --from-dump` gives them from the dump with no cluster at all. Exit 77
# (skipped) without Ceph or the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1 script=$2 plugins=$3
if ! command -v ceph-osd >/dev/null; then
	skip_test cluster "Ceph is not installed (./dev.sh test installs it)"
fi
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
dir=$t/cluster
export HOME=$t/home
mkdir -p "$HOME"
cleanup() {
	"$script" --dir "$dir" stop >/dev/null 2>&1
	rm -rf "$t"
}
trap cleanup EXIT
"$script" --dir "$dir" --plugins "$plugins" --osd-bytes 2147483648 start >"$t/start.log" 2>&1 ||
	{ cat "$t/start.log"; exit 1; }
export CEPH_CONF=$dir/ceph.conf
mapfile -t ckpts < <(model_files "$src" | head -n 16)
job=free-$$

# A pool the store cannot use (issue 26 item 5): refused at once, naming the fix.
ceph osd erasure-code-profile set rckpt-ec k=2 m=1 crush-failure-domain=osd >/dev/null 2>&1
check "an erasure-coded pool" expect_run 0 "$t/o" ceph osd pool create ecpool 8 8 erasure rckpt-ec
check "  a job on it is refused" expect_run 1 "$t/o" "$rckpt" --pool ecpool ckpt save --job "$job" "${ckpts[0]}"
check "  naming the fix" contains "$t/o" "use a replicated pool"
# (its placement groups never go active on one OSD: ask the monitor, not the pool)
ec_objects() { ceph df detail -f json | /usr/bin/python3 -c 'import json,sys; print(sum(p["stats"]["objects"] for p in json.load(sys.stdin)["pools"] if p["name"] == "ecpool"))'; }
check "  before it wrote anything" test "$(ec_objects)" -eq 0
ceph osd pool rm ecpool ecpool --yes-i-really-really-mean-it >/dev/null 2>&1 # its PGs would hold up restarts

check "save 16 real steps" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]}"
check "compact: keep-last 4, keep-every 3" expect_run 0 "$t/o" "$rckpt" ckpt compact --job "$job" --keep-last 4 --keep-every 3
mapfile -t steps < <("$rckpt" ckpt ls --job "$job" | awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}')
check "  some steps kept" test "${#steps[@]}" -ge 6
declare -A osd
bad=0
for s in "${steps[@]}"; do
	RCKPT_FOLD=osd "$rckpt" ckpt restore --job "$job" --step "$s" -o "$t/osd-$s.safetensors" >"$t/r" 2>&1 &&
		osd[$s]=$(sha "$t/osd-$s.safetensors") || { bad=$((bad + 1)); cat "$t/r" >&2; }
done
check "every kept step restores in the OSDs" test "$bad" -eq 0

check "export folds in the client" expect_run 0 "$t/o" "$rckpt" ckpt export --job "$job" -o "$t/ex1"
check "  and says so" contains "$t/o" "folding chains here"
same() { # DIR: how many kept steps DIR holds other bytes of than the OSDs gave
	local d=$1 s n=0
	for s in "${steps[@]}"; do
		f=$(printf '%s/step-%06d.safetensors' "$d" "$s")
		[ "$(sha "$f" 2>/dev/null)" = "${osd[$s]}" ] || { n=$((n + 1)); echo "  step $s differs in $d" >&2; }
	done
	echo "$n"
}
check "  every step bit-identical to the OSDs'" test "$(same "$t/ex1")" -eq 0
check "  nothing else" test "$(ls "$t/ex1" | wc -l)" -eq "${#steps[@]}"
# a step of a few hundred bytes that declares 16 MiB (a 2048 x 2048 tensor
# of zeros but one value): refused by restore and export, saying so, with
# no memory spent on what it declares (issue 48)
/usr/bin/python3 - "$t/bomb-000001.safetensors" <<'PY'
import json, struct, sys
import numpy as np
w = np.zeros((2048, 2048), dtype="<f4")
w[0, 7] = 1.0
b = w.tobytes()
h = json.dumps({"w": {"dtype": "F32", "shape": [2048, 2048], "data_offsets": [0, len(b)]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b)
PY
check "a step declaring far more than it stores" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job-bomb" "$t/bomb-000001.safetensors"
check "  restore refuses it" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job-bomb" -o "$t/bomb-r.safetensors"
check "    saying why" contains "$t/o" "declares more values than its bytes can hold"
check "    and writes nothing" test ! -e "$t/bomb-r.safetensors"
check "a dump of the pool" expect_run 0 "$t/o" rados -p rckpt --all export "$t/pool.dump"
peak() { # CMD...: runs it, then prints its peak resident KB on fd 3
	/usr/bin/python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=open("/dev/fd/3", "w"))
sys.exit(r.returncode)' "$@"
}
check "export --from-dump refuses the step" expect_run 1 "$t/o" peak "$rckpt" ckpt export --job "$job-bomb" --from-dump "$t/pool.dump" -o "$t/exb" 3>"$t/rss"
check "  saying why" contains "$t/o" "declares more values than its bytes can hold"
check "  within 300 MB (ASan's shadow included)" test "$(cat "$t/rss")" -lt 300000

# The class out of the OSD's load list (as an operator disables it).
"$script" --dir "$dir" stop >>"$t/start.log" 2>&1
sed -i -e '/^osd class load list/s/ rckpt//' -e '/^osd class default list/s/ rckpt//' "$CEPH_CONF"
"$script" --dir "$dir" --plugins "$plugins" start >>"$t/start.log" 2>&1 || { tail -20 "$t/start.log"; exit 1; }
check "status: the rckpt class is refused" expect_run 1 "$t/o" "$rckpt" status
check "  not permitted" contains "$t/o" "not permitted"
check "  restores still work, it says" contains "$t/o" "still restore, folded in the client"
bad=0 said=0
for s in "${steps[@]}"; do
	"$rckpt" ckpt restore --job "$job" --step "$s" -o "$t/x.safetensors" >"$t/r" 2>&1 &&
		[ "$(sha "$t/x.safetensors")" = "${osd[$s]}" ] || { bad=$((bad + 1)); cat "$t/r" >&2; }
	grep -q "folded in the client" "$t/r" && said=$((said + 1))
done
check "without the class, every kept step restores bit-identically" test "$bad" -eq 0
check "  each saying it folded in the client" test "$said" -eq "${#steps[@]}"
check "ls works without the class" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "export works without the class" expect_run 0 "$t/o" "$rckpt" ckpt export --job "$job" -o "$t/ex2"
check "  bit-identical" test "$(same "$t/ex2")" -eq 0
check "a save is refused, clearly" expect_run 1 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[0]}"
check "  naming the class" contains "$t/o" "not permitted"

# No cluster at all.
"$script" --dir "$dir" stop >>"$t/start.log" 2>&1
check "export --from-dump with the cluster down" expect_run 0 "$t/o" env -u CEPH_CONF "$rckpt" ckpt export --job "$job" --from-dump "$t/pool.dump" -o "$t/ex3"
check "  bit-identical" test "$(same "$t/ex3")" -eq 0
check "  one step of it" expect_run 0 "$t/o" "$rckpt" ckpt export --job "$job" --step "${steps[0]}" --from-dump "$t/pool.dump" -o "$t/ex4"
check "    only that one" test "$(ls "$t/ex4" | wc -l)" -eq 1
head -c 100 "$t/pool.dump" >"$t/cut.dump"
check "a cut dump is refused" expect_run 1 "$t/o" "$rckpt" ckpt export --job "$job" --from-dump "$t/cut.dump" -o "$t/ex5"
check "  saying what it is not" contains "$t/o" "not a dump"
check "a job the dump lacks" expect_run 1 "$t/o" "$rckpt" ckpt export --job nosuchjob --from-dump "$t/pool.dump" -o "$t/ex6"
check "  says so" contains "$t/o" "job nosuchjob has no committed step"
finish
